package dev.kreplay.jvm;

import java.io.IOException;
import java.io.InputStream;
import java.lang.instrument.Instrumentation;
import java.lang.invoke.MethodHandles;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ForkJoinTask;

/**
 * kreplay's JVM hook, loaded by HotSpot's dynamic attach (agent/runtimes/jvm/): defines
 * java.util.concurrent.KreplayUnits (and its nested classes) into java.base from the jar's
 * kreplay-base/ entries, through a lookup in that package, which it opens to this module only;
 * then rewrites the classes Hook names. Loaded again (a restarted agent), it finds KreplayUnits
 * there, makes each thread register its slot anew and rewrites nothing twice.
 */
public final class Agent {
  private Agent() {}

  static final String UNITS = "java.util.concurrent.KreplayUnits";
  private static final String[] CLASSES = {
    "KreplayUnits$Slot",
    "KreplayUnits$Key",
    "KreplayUnits$Conn",
    "KreplayUnits$Message",
    "KreplayUnits$Messages",
    "KreplayUnits"
  };

  public static void agentmain(String args, Instrumentation inst) throws Exception {
    synchronized (Agent.class) {
      Class<?> units = defined();
      if (units != null) {
        units.getMethod("install", String.class).invoke(null, args);
        return;
      }
      Module self = Agent.class.getModule();
      inst.redefineModule(
          Object.class.getModule(),
          Set.of(),
          Map.of(),
          Map.of("java.util.concurrent", Set.of(self)),
          Set.of(),
          Map.of());
      MethodHandles.Lookup lookup = MethodHandles.privateLookupIn(ForkJoinTask.class, MethodHandles.lookup());
      for (String name : CLASSES) units = lookup.defineClass(bytes(name));
      units.getMethod("install", String.class).invoke(null, args);
      Hook hook = new Hook();
      inst.addTransformer(hook, true);
      List<Class<?>> loaded = new ArrayList<>();
      for (Class<?> c : inst.getAllLoadedClasses())
        if (Hook.targets(c.getName()) && inst.isModifiableClass(c)) loaded.add(c);
      // one at a time: a class the JVM will not take back keeps its code, the others are rewritten
      for (Class<?> c : loaded) {
        try {
          inst.retransformClasses(c);
        } catch (Exception | LinkageError kept) {
          // its hand-offs or requests run as none
        }
      }
    }
  }

  /** KreplayUnits when an earlier load defined it. */
  private static Class<?> defined() {
    try {
      return Class.forName(UNITS, false, null);
    } catch (ClassNotFoundException e) {
      return null;
    }
  }

  private static byte[] bytes(String name) throws IOException {
    try (InputStream in = Agent.class.getResourceAsStream("/kreplay-base/java/util/concurrent/" + name + ".class")) {
      if (in == null) throw new IOException("the hook's jar lacks " + name);
      return in.readAllBytes();
    }
  }
}
