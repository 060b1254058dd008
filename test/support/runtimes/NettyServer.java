import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.concurrent.DefaultEventExecutorGroup;
import io.netty.util.concurrent.EventExecutorGroup;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A Netty 4.1 HTTP server (Debian's libnetty-java) as a Netty service writes one: two event loops
 * multiplexing the connections, HttpServerCodec and HttpObjectAggregator, and a handler that
 * writes OUT/<id>.handler on the event loop, OUT/<id>.loop in a task on the channel's event loop,
 * then OUT/<id>.group on a DefaultEventExecutorGroup's thread, which answers (keep-alive), each
 * named by the request's x-request-id. Usage: java -cp NETTY NettyServer.java OUT; prints its port.
 */
public class NettyServer {
  static void write(Path file, String id) {
    try {
      Files.writeString(file, id);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public static void main(String[] args) throws Exception {
    Path out = Path.of(args[0]);
    EventLoopGroup loops = new NioEventLoopGroup(2);
    EventExecutorGroup group = new DefaultEventExecutorGroup(4);
    SimpleChannelInboundHandler<FullHttpRequest> handler =
        new SimpleChannelInboundHandler<FullHttpRequest>() {
          @Override
          public boolean isSharable() {
            return true;
          }

          @Override
          protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
            String id = req.headers().get("x-request-id");
            boolean keepAlive = HttpUtil.isKeepAlive(req);
            write(out.resolve(id + ".handler"), id);
            ctx.executor()
                .execute(
                    () -> {
                      write(out.resolve(id + ".loop"), id);
                      group.execute(
                          () -> {
                            write(out.resolve(id + ".group"), id);
                            FullHttpResponse res =
                                new DefaultFullHttpResponse(
                                    HttpVersion.HTTP_1_1,
                                    HttpResponseStatus.OK,
                                    Unpooled.copiedBuffer("ok", StandardCharsets.US_ASCII));
                            HttpUtil.setContentLength(res, 2);
                            HttpUtil.setKeepAlive(res, keepAlive);
                            res.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/plain");
                            ctx.writeAndFlush(res);
                          });
                    });
          }
        };
    Channel server =
        new ServerBootstrap()
            .group(loops)
            .channel(NioServerSocketChannel.class)
            .childHandler(
                new ChannelInitializer<SocketChannel>() {
                  @Override
                  protected void initChannel(SocketChannel ch) {
                    ch.pipeline()
                        .addLast(new HttpServerCodec())
                        .addLast(new HttpObjectAggregator(1 << 16))
                        .addLast(handler);
                  }
                })
            .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
            .sync()
            .channel();
    System.out.println(((InetSocketAddress) server.localAddress()).getPort());
  }
}
