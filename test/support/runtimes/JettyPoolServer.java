import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

/**
 * An embedded Jetty 9 server (Debian's libjetty9-java) as a Java service writes one: a servlet that
 * writes OUT/<id>.handler on Jetty's thread and OUT/<id>.pool through an ExecutorService it waits
 * on, each named by the request's x-request-id. Usage: java -cp JETTY JettyPoolServer.java OUT;
 * prints its port.
 */
public class JettyPoolServer {
  public static void main(String[] args) throws Exception {
    Path out = Path.of(args[0]);
    ExecutorService pool = Executors.newFixedThreadPool(8);
    Server server = new Server(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
    ServletContextHandler context = new ServletContextHandler();
    context.setContextPath("/");
    context.addServlet(
        new ServletHolder(
            new HttpServlet() {
              @Override
              protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
                String id = req.getHeader("x-request-id");
                Files.writeString(out.resolve(id + ".handler"), id);
                try {
                  pool.submit(() -> Files.writeString(out.resolve(id + ".pool"), id)).get();
                } catch (Exception e) {
                  throw new IOException(e);
                }
                res.getWriter().write("ok");
              }
            }),
        "/");
    server.setHandler(context);
    server.start();
    System.out.println(((ServerConnector) server.getConnectors()[0]).getLocalPort());
  }
}
