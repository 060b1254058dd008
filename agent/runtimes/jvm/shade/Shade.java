import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Enumeration;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.commons.ClassRemapper;
import org.objectweb.asm.commons.Remapper;

/**
 * Build step of the JVM hook's jar (Makefile): copies the hook's classes and ASM's into OUT with
 * ASM's package moved under the hook's own (dev/kreplay/jvm/asm), so the jar on the boot class path
 * never clashes with an application's own ASM. Usage: Shade OUT CLASSES_DIR ASM_JAR...
 */
public final class Shade {
  private static final String FROM = "org/objectweb/asm/";
  private static final String TO = "dev/kreplay/jvm/asm/";

  public static void main(String[] args) throws IOException {
    Path out = Path.of(args[0]);
    try (var files = Files.walk(Path.of(args[1]))) {
      for (Path file : (Iterable<Path>) files.filter(f -> f.toString().endsWith(".class"))::iterator)
        write(out, Path.of(args[1]).relativize(file).toString(), Files.readAllBytes(file));
    }
    for (int i = 2; i < args.length; i++) {
      try (ZipFile jar = new ZipFile(args[i])) {
        for (Enumeration<? extends ZipEntry> e = jar.entries(); e.hasMoreElements(); ) {
          ZipEntry entry = e.nextElement();
          String name = entry.getName();
          if (!name.startsWith(FROM) || !name.endsWith(".class")) continue;
          try (InputStream in = jar.getInputStream(entry)) {
            write(out, TO + name.substring(FROM.length()), in.readAllBytes());
          }
        }
      }
    }
  }

  private static void write(Path out, String name, byte[] bytes) throws IOException {
    ClassReader reader = new ClassReader(bytes);
    ClassWriter writer = new ClassWriter(0);
    Remapper moved =
        new Remapper() {
          @Override
          public String map(String internalName) {
            return internalName.startsWith(FROM) ? TO + internalName.substring(FROM.length()) : internalName;
          }
        };
    reader.accept(new ClassRemapper(writer, moved), 0);
    Path target = out.resolve(name);
    Files.createDirectories(target.getParent());
    Files.write(target, writer.toByteArray());
  }
}
