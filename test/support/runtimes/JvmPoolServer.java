import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.TimeUnit;

/**
 * A com.sun.net.httpserver server as a Java service writes one: its handlers run on a fixed pool of
 * 8, each request calls an upstream with java.net.http.HttpClient and hands its writes to other
 * threads. Each request writes files named by its x-request-id: OUT/<id>.handler from the handler's
 * thread, OUT/<id>.pool from an ExecutorService (a ThreadPoolExecutor), OUT/<id>.async from
 * CompletableFuture.runAsync, OUT/<id>.fj from a ForkJoinPool, OUT/<id>.later from a
 * ScheduledExecutorService. Usage: java JvmPoolServer.java OUT UPSTREAM_PORT; prints its port.
 */
public class JvmPoolServer {
  public static void main(String[] args) throws Exception {
    Path out = Path.of(args[0]);
    URI upstream = URI.create("http://127.0.0.1:" + args[1] + "/");
    HttpClient client = HttpClient.newHttpClient();
    ExecutorService workers = Executors.newFixedThreadPool(8);
    ForkJoinPool forkJoin = new ForkJoinPool(4);
    var scheduled = Executors.newScheduledThreadPool(2);
    HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 256);
    server.setExecutor(Executors.newFixedThreadPool(8));
    server.createContext(
        "/",
        (HttpExchange exchange) -> {
          String id = exchange.getRequestHeaders().getFirst("x-request-id");
          byte[] answer = "ok".getBytes();
          int code = 200;
          try {
            client.send(HttpRequest.newBuilder(upstream).build(), HttpResponse.BodyHandlers.ofString());
            Files.writeString(out.resolve(id + ".handler"), id);
            workers.submit(() -> Files.writeString(out.resolve(id + ".pool"), id)).get();
            CompletableFuture.runAsync(() -> write(out, id, "async")).join();
            forkJoin.submit(() -> write(out, id, "fj")).get();
            scheduled.schedule(() -> write(out, id, "later"), 1, TimeUnit.MILLISECONDS).get();
          } catch (Exception e) {
            answer = e.toString().getBytes();
            code = 500;
          }
          exchange.sendResponseHeaders(code, answer.length);
          try (OutputStream body = exchange.getResponseBody()) {
            body.write(answer);
          }
        });
    server.start();
    System.out.println(server.getAddress().getPort());
  }

  private static void write(Path out, String id, String what) {
    try {
      Files.writeString(out.resolve(id + "." + what), id);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
