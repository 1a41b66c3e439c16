import java.io.BufferedReader;
import java.io.InputStreamReader;

import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Session;
import javax.jms.TextMessage;
import javax.jms.TransactionRolledBackException;

import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * A transacted Java JMS consumer on a failover URL across a broker restart (the Python
 * client's test_client_tx_failover.py compares with it): receives TAKEN messages, prints
 * "taken: BODY" each, waits for a line on stdin (the broker was killed and restarted), then
 * commits ("commit: committed" or "commit: rolled back"), receives TOTAL messages
 * ("received: BODY REDELIVERED"), commits again and says whether anything is left.
 * Usage: TxFailover URL QUEUE TOTAL TAKEN
 */
public class TxFailover {
    public static void main(String[] args) throws Exception {
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(args[0]);
        int total = Integer.parseInt(args[2]);
        int taken = Integer.parseInt(args[3]);
        Connection connection = factory.createConnection();
        connection.start();
        Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
        MessageConsumer consumer = session.createConsumer(session.createQueue(args[1]));
        for (int i = 0; i < taken; i++) {
            say("taken: " + ((TextMessage) consumer.receive(20000)).getText());
        }
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        try {
            session.commit();
            say("commit: committed");
        } catch (TransactionRolledBackException e) {
            say("commit: rolled back");
        }
        for (int i = 0; i < total; i++) {
            Message message = consumer.receive(20000);
            if (message == null) {
                say("stalled: " + i);
                break;
            }
            say("received: " + ((TextMessage) message).getText() + " " + message.getJMSRedelivered());
        }
        session.commit();
        say("commit2: committed");
        say("left: " + (consumer.receive(500) == null ? "none" : "some"));
        connection.close();
    }

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
