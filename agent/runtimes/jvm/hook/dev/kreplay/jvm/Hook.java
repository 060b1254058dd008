package dev.kreplay.jvm;

import java.lang.instrument.ClassFileTransformer;
import java.security.ProtectionDomain;
import java.util.Set;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.Label;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.commons.AdviceAdapter;

/**
 * What the hook rewrites, each a few instructions that call Units (no field nor method added: the
 * classes may be loaded already, and a retransformation adds none):
 * <ul>
 *   <li>hand-offs: where a task is handed to another thread (ThreadPoolExecutor.execute,
 *       ScheduledThreadPoolExecutor's queueing, ForkJoinPool's external submissions and
 *       ForkJoinTask.fork, CompletableFuture's thread per task), Units.hand(task) keeps the
 *       submitter's unit with it (not Thread.start's: a pool's thread would keep its first
 *       task's unit for life);
 *   <li>runs: where that thread runs it, the task's unit is entered around it: between
 *       ThreadPoolExecutor's beforeExecute and afterExecute (called per task, also by a worker
 *       whose loop began before the hook), and around Thread.run's target.run() and
 *       ForkJoinTask.doExec's exec(), whose calls go through Units;
 *   <li>requests: where a server hands a request to the program (com.sun.net.httpserver's filter
 *       chain, Tomcat's servlet wrapper, Jetty's servlet holder), a unit is opened from the request's method, path,
 *       traceparent and x-request-id, and closed when that returns, however it returns (a
 *       servlet's async request when Tomcat recycles its Request, its response complete);
 *   <li>Netty: a channel handler context's read of an HTTP request opens a unit the channel keeps
 *       until the flush that sends its response's end; each of the context's reads, writes and
 *       flushes runs in the channel's unit, and Netty's event executors hand tasks as pools do.
 * </ul>
 * Tomcat's own ThreadPoolExecutor (a copy of the JDK's) is rewritten as the JDK's. KreplayUnits is
 * in java.base: every module reads it, every class loader sees it.
 */
final class Hook implements ClassFileTransformer {
  private static final String UNITS = "java/util/concurrent/KreplayUnits";
  private static final String TPE = "java/util/concurrent/ThreadPoolExecutor";
  private static final String TOMCAT_TPE = "org/apache/tomcat/util/threads/ThreadPoolExecutor";
  private static final String STPE = "java/util/concurrent/ScheduledThreadPoolExecutor";
  private static final String FJP = "java/util/concurrent/ForkJoinPool";
  private static final String FJT = "java/util/concurrent/ForkJoinTask";
  private static final String THREAD = "java/lang/Thread";
  /** CompletableFuture's executor where the common pool has one thread or none (two cores): a thread per task */
  private static final String THREAD_PER_TASK = "java/util/concurrent/CompletableFuture$ThreadPerTaskExecutor";
  private static final String LINK = "sun/net/httpserver/ServerImpl$Exchange$LinkHandler";
  private static final String TOMCAT_WRAPPER = "org/apache/catalina/core/StandardWrapperValve";
  private static final String TOMCAT_REQUEST = "org/apache/catalina/connector/Request";
  private static final String JETTY_HOLDER = "org/eclipse/jetty/servlet/ServletHolder";
  private static final String JETTY_REQUEST = "org/eclipse/jetty/server/Request";
  private static final String NETTY_CONTEXT = "io/netty/channel/AbstractChannelHandlerContext";
  private static final String NETTY_EXECUTOR = "io/netty/util/concurrent/SingleThreadEventExecutor";
  private static final String NETTY_TASKS = "io/netty/util/concurrent/AbstractEventExecutor";
  private static final String NETTY_DEFAULT = "io/netty/util/concurrent/DefaultEventExecutor";

  private static final Set<String> TARGETS =
      Set.of(
          TPE,
          TOMCAT_TPE,
          STPE,
          FJP,
          FJT,
          THREAD_PER_TASK,
          THREAD,
          LINK,
          TOMCAT_WRAPPER,
          TOMCAT_REQUEST,
          JETTY_HOLDER,
          JETTY_REQUEST,
          NETTY_CONTEXT,
          NETTY_EXECUTOR,
          NETTY_TASKS,
          NETTY_DEFAULT);

  static boolean targets(String className) {
    return TARGETS.contains(className.replace('.', '/'));
  }

  @Override
  public byte[] transform(
      Module module,
      ClassLoader loader,
      String name,
      Class<?> redefined,
      ProtectionDomain domain,
      byte[] bytes) {
    if (name == null || !TARGETS.contains(name)) return null;
    try {
      return rewrite(name, loader, bytes);
    } catch (Throwable failed) {
      // the class stays as it is: its hand-offs or requests run as none
      return null;
    }
  }

  static byte[] rewrite(String name, ClassLoader loader, byte[] bytes) {
    ClassReader reader = new ClassReader(bytes);
    boolean request =
        name.equals(LINK) || name.equals(TOMCAT_WRAPPER) || name.equals(JETTY_HOLDER) || name.equals(NETTY_CONTEXT);
    ClassWriter writer =
        request ? new LoaderWriter(reader, loader) : new ClassWriter(reader, ClassWriter.COMPUTE_MAXS);
    reader.accept(
        new ClassVisitor(Opcodes.ASM9, writer) {
          @Override
          public MethodVisitor visitMethod(
              int access, String method, String desc, String signature, String[] exceptions) {
            MethodVisitor mv = super.visitMethod(access, method, desc, signature, exceptions);
            return mv == null ? null : method(name, access, method, desc, mv);
          }
        },
        request ? ClassReader.EXPAND_FRAMES : 0);
    return writer.toByteArray();
  }

  private static MethodVisitor method(String owner, int access, String name, String desc, MethodVisitor mv) {
    String at = name + desc;
    switch (owner) {
      case TPE:
      case TOMCAT_TPE:
        if (at.equals("execute(Ljava/lang/Runnable;)V")) return handsArgument(mv);
        // per task, not runWorker's loop: a worker started before the hook runs the loop's old code for life
        if (at.equals("beforeExecute(Ljava/lang/Thread;Ljava/lang/Runnable;)V")) return handsTo(mv, 2, "before");
        if (at.equals("afterExecute(Ljava/lang/Runnable;Ljava/lang/Throwable;)V")) return handsTo(mv, 1, "after");
        return mv;
      case STPE:
        if (name.equals("delayedExecute") || name.equals("reExecutePeriodic")) return handsArgument(mv);
        return mv;
      case FJP:
        if (name.equals("externalSubmit")) return handsArgument(mv);
        return mv;
      case FJT:
        if (at.equals("fork()Ljava/util/concurrent/ForkJoinTask;")) return handsThis(mv);
        if (at.equals("doExec()I"))
          return runsThrough(mv, FJT, "exec", "()Z", "exec", "(Ljava/util/concurrent/ForkJoinTask;)Z");
        return mv;
      case THREAD_PER_TASK:
        if (at.equals("execute(Ljava/lang/Runnable;)V")) return handsArgument(mv);
        return mv;
      case THREAD:
        if (at.equals("run()V")) return runsThrough(mv, "java/lang/Runnable", "run", "()V", "run", "(Ljava/lang/Runnable;)V");
        return mv;
      case LINK:
        if (at.equals("handle(Lcom/sun/net/httpserver/HttpExchange;)V"))
          return new Request(mv, access, name, desc) {
            @Override
            void headOf() {
              String exchange = "com/sun/net/httpserver/HttpExchange";
              String headers = "com/sun/net/httpserver/Headers";
              loadArg(0);
              mv.visitMethodInsn(INVOKEVIRTUAL, exchange, "getRequestMethod", "()Ljava/lang/String;", false);
              loadArg(0);
              mv.visitMethodInsn(INVOKEVIRTUAL, exchange, "getRequestURI", "()Ljava/net/URI;", false);
              mv.visitMethodInsn(INVOKEVIRTUAL, "java/net/URI", "getRawPath", "()Ljava/lang/String;", false);
              for (String header : new String[] {"traceparent", "x-request-id"}) {
                loadArg(0);
                mv.visitMethodInsn(INVOKEVIRTUAL, exchange, "getRequestHeaders", "()L" + headers + ";", false);
                mv.visitLdcInsn(header);
                mv.visitMethodInsn(INVOKEVIRTUAL, headers, "getFirst", "(Ljava/lang/String;)Ljava/lang/String;", false);
              }
            }
          };
        return mv;
      case TOMCAT_WRAPPER:
        if (name.equals("invoke") && desc.startsWith("(L" + TOMCAT_REQUEST + ";"))
          return new ContainerRequest(mv, access, name, desc, TOMCAT_REQUEST);
        return mv;
      case JETTY_HOLDER:
        if (name.equals("handle") && desc.startsWith("(L" + JETTY_REQUEST + ";"))
          return new ContainerRequest(mv, access, name, desc, JETTY_REQUEST);
        return mv;
      case JETTY_REQUEST:
      case TOMCAT_REQUEST:
        // recycled once its response is complete, an async one's too (Jetty's as Tomcat's)
        if (at.equals("recycle()V")) return handsTo(mv, 0, "recycled");
        return mv;
      case NETTY_CONTEXT:
        // each handler's read, write and flush, whichever thread runs it (an event loop, a group's executor)
        if (at.equals("invokeChannelRead(Ljava/lang/Object;)V")) return new NettyCall(mv, access, name, desc, 0);
        if (at.equals("invokeWrite0(Ljava/lang/Object;Lio/netty/channel/ChannelPromise;)V"))
          return new NettyCall(mv, access, name, desc, 1);
        if (at.equals("invokeFlush0()V")) return new NettyCall(mv, access, name, desc, 2);
        if (at.equals("invokeChannelInactive()V")) return nettyGone(mv);
        return mv;
      case NETTY_EXECUTOR:
        // an event loop's or a DefaultEventExecutorGroup's queue
        if (name.equals("execute") && desc.startsWith("(Ljava/lang/Runnable;")) return handsArgument(mv);
        return mv;
      case NETTY_TASKS:
        if (at.equals("safeExecute(Ljava/lang/Runnable;)V"))
          return runsThrough(mv, "java/lang/Runnable", "run", "()V", "run", "(Ljava/lang/Runnable;)V");
        return mv;
      case NETTY_DEFAULT:
        if (at.equals("run()V")) return runsThrough(mv, "java/lang/Runnable", "run", "()V", "run", "(Ljava/lang/Runnable;)V");
        return mv;
      default:
        return mv;
    }
  }

  /** Units.nettyGone(this.channel()) where the method begins. */
  private static MethodVisitor nettyGone(MethodVisitor mv) {
    return new MethodVisitor(Opcodes.ASM9, mv) {
      @Override
      public void visitCode() {
        super.visitCode();
        super.visitVarInsn(Opcodes.ALOAD, 0);
        super.visitMethodInsn(Opcodes.INVOKEVIRTUAL, NETTY_CONTEXT, "channel", "()Lio/netty/channel/Channel;", false);
        super.visitMethodInsn(Opcodes.INVOKESTATIC, UNITS, "nettyGone", "(Ljava/lang/Object;)V", false);
      }
    };
  }

  /** Units.hand(the method's first argument) where the method begins. */
  private static MethodVisitor handsArgument(MethodVisitor mv) {
    return handsTo(mv, 1, "hand");
  }

  /** Units.`call`(local `slot`, an argument) where the method begins. */
  private static MethodVisitor handsTo(MethodVisitor mv, int slot, String call) {
    return new MethodVisitor(Opcodes.ASM9, mv) {
      @Override
      public void visitCode() {
        super.visitCode();
        super.visitVarInsn(Opcodes.ALOAD, slot);
        super.visitMethodInsn(Opcodes.INVOKESTATIC, UNITS, call, "(Ljava/lang/Object;)V", false);
      }
    };
  }

  /** Units.hand(this) where the method begins. */
  private static MethodVisitor handsThis(MethodVisitor mv) {
    return new MethodVisitor(Opcodes.ASM9, mv) {
      @Override
      public void visitCode() {
        super.visitCode();
        super.visitVarInsn(Opcodes.ALOAD, 0);
        super.visitMethodInsn(Opcodes.INVOKESTATIC, UNITS, "hand", "(Ljava/lang/Object;)V", false);
      }
    };
  }

  /** The method's calls of owner.name(desc) go through Units.via (same operands, same result). */
  private static MethodVisitor runsThrough(
      MethodVisitor mv, String owner, String name, String desc, String via, String viaDesc) {
    return new MethodVisitor(Opcodes.ASM9, mv) {
      @Override
      public void visitMethodInsn(int opcode, String o, String n, String d, boolean itf) {
        if (o.equals(owner) && n.equals(name) && d.equals(desc))
          super.visitMethodInsn(Opcodes.INVOKESTATIC, UNITS, via, viaDesc, false);
        else super.visitMethodInsn(opcode, o, n, d, itf);
      }
    };
  }

  /** A method run in a unit: entered where it begins, left (`close`) wherever it ends. */
  private abstract static class Around extends AdviceAdapter {
    private final Label start = new Label();
    private final Label handler = new Label();

    Around(MethodVisitor mv, int access, String name, String desc) {
      super(Opcodes.ASM9, mv, access, name, desc);
    }

    /** Where it begins: the unit entered. */
    abstract void enter();

    /** Where it ends: the unit left. */
    abstract void close();

    @Override
    protected void onMethodEnter() {
      enter();
      mv.visitLabel(start);
    }

    @Override
    protected void onMethodExit(int opcode) {
      // a throw is closed by the handler below
      if (opcode != ATHROW) close();
    }

    @Override
    public void visitMaxs(int maxStack, int maxLocals) {
      mv.visitTryCatchBlock(start, handler, handler, null);
      mv.visitLabel(handler);
      close();
      mv.visitInsn(ATHROW);
      super.visitMaxs(maxStack, maxLocals);
    }
  }

  /** A method that serves one request: a unit opened where it begins, closed wherever it ends. */
  private abstract static class Request extends Around {
    Request(MethodVisitor mv, int access, String name, String desc) {
      super(mv, access, name, desc);
    }

    /** Pushes the request's method, path, traceparent and x-request-id (Strings, null when absent). */
    abstract void headOf();

    @Override
    void enter() {
      headOf();
      mv.visitMethodInsn(
          INVOKESTATIC,
          UNITS,
          "open",
          "(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)V",
          false);
    }

    /** The request's unit is closed (and left). */
    @Override
    void close() {
      mv.visitMethodInsn(INVOKESTATIC, UNITS, "close", "()V", false);
    }
  }

  /**
   * A Netty handler context's invocation of its handler (`what`: 0 a read, its message the first
   * argument; 1 a write, likewise; 2 a flush), in the unit of the request its channel serves.
   */
  private static final class NettyCall extends Around {
    private final int what;

    NettyCall(MethodVisitor mv, int access, String name, String desc, int what) {
      super(mv, access, name, desc);
      this.what = what;
    }

    private void channel() {
      loadThis();
      mv.visitMethodInsn(INVOKEVIRTUAL, NETTY_CONTEXT, "channel", "()Lio/netty/channel/Channel;", false);
    }

    @Override
    void enter() {
      channel();
      if (what == 2) mv.visitInsn(ACONST_NULL);
      else loadArg(0);
      push(what);
      mv.visitMethodInsn(INVOKESTATIC, UNITS, "netty", "(Ljava/lang/Object;Ljava/lang/Object;I)V", false);
    }

    @Override
    void close() {
      channel();
      push(what);
      mv.visitMethodInsn(INVOKESTATIC, UNITS, "nettyLeft", "(Ljava/lang/Object;I)V", false);
    }
  }

  /**
   * A servlet container's request (Tomcat's StandardWrapperValve.invoke, Jetty's
   * ServletHolder.handle), read from the container's own request class, the method's first
   * argument: an async one (startAsync) stays open past the servlet's return, until the container
   * recycles its request.
   */
  private static final class ContainerRequest extends Request {
    private final String request;

    ContainerRequest(MethodVisitor mv, int access, String name, String desc, String request) {
      super(mv, access, name, desc);
      this.request = request;
    }

    @Override
    void headOf() {
      String get = "(Ljava/lang/String;)Ljava/lang/String;";
      loadArg(0);
      mv.visitMethodInsn(INVOKEVIRTUAL, request, "getMethod", "()Ljava/lang/String;", false);
      loadArg(0);
      mv.visitMethodInsn(INVOKEVIRTUAL, request, "getRequestURI", "()Ljava/lang/String;", false);
      for (String header : new String[] {"traceparent", "x-request-id"}) {
        loadArg(0);
        mv.visitLdcInsn(header);
        mv.visitMethodInsn(INVOKEVIRTUAL, request, "getHeader", get, false);
      }
    }

    @Override
    void close() {
      loadArg(0);
      loadArg(0);
      mv.visitMethodInsn(INVOKEVIRTUAL, request, "isAsyncStarted", "()Z", false);
      mv.visitMethodInsn(INVOKESTATIC, UNITS, "finish", "(Ljava/lang/Object;Z)V", false);
    }
  }

  /** Frames computed with the classes' own loader (a rewritten method gains a handler). */
  private static final class LoaderWriter extends ClassWriter {
    private final ClassLoader loader;

    LoaderWriter(ClassReader reader, ClassLoader loader) {
      super(reader, ClassWriter.COMPUTE_FRAMES);
      this.loader = loader;
    }

    @Override
    protected String getCommonSuperClass(String a, String b) {
      try {
        Class<?> x = Class.forName(a.replace('/', '.'), false, loader);
        Class<?> y = Class.forName(b.replace('/', '.'), false, loader);
        if (x.isAssignableFrom(y)) return a;
        if (y.isAssignableFrom(x)) return b;
        if (x.isInterface() || y.isInterface()) return "java/lang/Object";
        do x = x.getSuperclass();
        while (!x.isAssignableFrom(y));
        return x.getName().replace('.', '/');
      } catch (ClassNotFoundException | LinkageError e) {
        throw new IllegalStateException("no common superclass of " + a + " and " + b, e);
      }
    }
  }
}
