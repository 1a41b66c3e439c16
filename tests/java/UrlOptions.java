// Which broker URLs ActiveMQ's Java client 5.17 accepts: for each URL on standard input (one
// a line), create an ActiveMQConnectionFactory, a connection, start it and open a session
// against a running broker; print "ACCEPTED<TAB>url" or "REFUSED<TAB>url<TAB>reason".
// tests/integration/test_client_options_parity.py runs the same table through dovecote's
// client and compares.
//
// Where the Java client checks: jms.* in setBrokerURL (the factory's constructor) when at
// least one jms option was set, else with the transport's; a tcp:// URI's options in
// createConnection (TransportFactory.doConnect: "Invalid connect parameters"), socket.* when
// the socket opens; a failover member's options only when failover connects to it, in the
// background: a member whose options are refused is never connected, so start() waits on.
// A URL whose connection has not started within the deadline is reported refused.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import javax.jms.Connection;
import javax.jms.Session;
import org.apache.activemq.ActiveMQConnectionFactory;

public class UrlOptions {
    static final long DEADLINE_MS = 6000;

    public static void main(String[] args) throws Exception {
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);  // a failover connection still retrying must not keep us alive
            return t;
        });
        // Every URL is tried at once, each on a connection of its own, so that the URLs that
        // never connect wait out one deadline together rather than one each.
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        List<String> urls = new ArrayList<>();
        List<Future<Connection>> attempts = new ArrayList<>();
        String url;
        while ((url = in.readLine()) != null) {
            if (url.isEmpty()) continue;
            final String u = url;
            urls.add(u);
            attempts.add(pool.submit(() -> {
                Connection c = new ActiveMQConnectionFactory(u).createConnection();
                c.start();
                c.createSession(false, Session.AUTO_ACKNOWLEDGE).close();
                return c;
            }));
        }
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        for (int i = 0; i < urls.size(); i++) {
            String u = urls.get(i);
            Future<Connection> attempt = attempts.get(i);
            String verdict;
            try {
                long left = Math.max(0, deadline - System.currentTimeMillis());
                Connection c = attempt.get(left, TimeUnit.MILLISECONDS);
                pool.submit(() -> { c.close(); return null; });
                verdict = "ACCEPTED\t" + u;
            } catch (TimeoutException e) {
                attempt.cancel(true);
                verdict = "REFUSED\t" + u + "\tnever connected within " + DEADLINE_MS + " ms";
            } catch (java.util.concurrent.ExecutionException e) {
                Throwable cause = e.getCause();
                while (cause.getCause() != null && cause.getCause() != cause) cause = cause.getCause();
                verdict = "REFUSED\t" + u + "\t" + String.valueOf(cause).replace('\t', ' ').replace('\n', ' ');
            }
            System.out.println(verdict);
            System.out.flush();
        }
        System.exit(0);
    }
}
