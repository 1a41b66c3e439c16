import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.JMSException;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.apache.activemq.ActiveMQConnectionFactory;

/**
 * A Java JMS producer and an auto-acknowledging consumer on one failover URL (the replicated
 * store's tests, issue 35): sends COUNT persistent messages, one every few milliseconds,
 * printing "sent: BODY" once each send is answered, while the consumer prints
 * "received: BODY" for each message handed to it; it ends when it has COUNT different ones
 * or nothing came for IDLE seconds. Usage: FailoverLoad URL QUEUE COUNT IDLE
 */
public class FailoverLoad {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        String queue = args[1];
        int count = Integer.parseInt(args[2]);
        long idleMs = Long.parseLong(args[3]) * 1000;
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(url);
        Set<String> received = ConcurrentHashMap.newKeySet();

        Connection consuming = factory.createConnection();
        consuming.start();
        Session consumerSession = consuming.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageConsumer consumer = consumerSession.createConsumer(consumerSession.createQueue(queue));
        Thread consumerThread = new Thread(() -> {
            long last = System.currentTimeMillis();
            try {
                while (received.size() < count && System.currentTimeMillis() - last < idleMs) {
                    Message message = consumer.receive(200);
                    if (message == null) {
                        continue;
                    }
                    String body = ((TextMessage) message).getText();
                    received.add(body);
                    last = System.currentTimeMillis();
                    say("received: " + body);
                }
            } catch (JMSException e) {
                say("consumer failed: " + e);
            }
        });
        consumerThread.start();

        Connection producing = factory.createConnection();
        producing.start();
        Session producerSession = producing.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageProducer producer = producerSession.createProducer(producerSession.createQueue(queue));
        producer.setDeliveryMode(DeliveryMode.PERSISTENT);
        for (int i = 0; i < count; i++) {
            String body = "java-" + i;
            try {
                producer.send(producerSession.createTextMessage(body));
                say("sent: " + body);
            } catch (JMSException e) {
                say("refused: " + body + " " + e.getMessage());
            }
            Thread.sleep(5);
        }
        consumerThread.join();
        say("done: " + received.size());
        producing.close();
        consuming.close();
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
