import jakarta.servlet.AsyncContext;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Servlets as a Tomcat 10 application writes them (jakarta.servlet), each request writing files
 * named by its x-request-id under the directory of the context's init parameter `out`:
 * - Pool (/pool): OUT/<id>.handler from the container's thread, OUT/<id>.pool from an
 *   ExecutorService it waits on;
 * - Async (/async): startAsync, then AsyncContext.start (Tomcat's executor) writes OUT/<id>.async
 *   and hands OUT/<id>.pool to the ExecutorService, then completes the response.
 */
public class TomcatServlets {
  static final ExecutorService POOL = Executors.newFixedThreadPool(8);

  static void write(HttpServletRequest req, String what) throws IOException {
    String id = req.getHeader("x-request-id");
    Path out = Path.of(req.getServletContext().getInitParameter("out"));
    Files.writeString(out.resolve(id + "." + what), id);
  }

  static void handOff(HttpServletRequest req) throws IOException {
    try {
      POOL.submit(() -> {
        write(req, "pool");
        return null;
      }).get();
    } catch (Exception e) {
      throw new IOException(e);
    }
  }

  public static class Pool extends HttpServlet {
    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws ServletException, IOException {
      write(req, "handler");
      handOff(req);
      res.getWriter().write("ok");
    }
  }

  public static class Async extends HttpServlet {
    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) {
      AsyncContext ctx = req.startAsync();
      ctx.start(() -> {
        try {
          write(req, "async");
          handOff(req);
          ctx.getResponse().getWriter().write("ok");
        } catch (IOException e) {
          ((HttpServletResponse) ctx.getResponse()).setStatus(500);
        }
        ctx.complete();
      });
    }
  }
}
