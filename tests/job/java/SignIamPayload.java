import java.nio.charset.StandardCharsets;
import java.security.PrivilegedExceptionAction;
import java.util.HashMap;
import java.util.Map;
import javax.security.auth.Subject;
import javax.security.sasl.Sasl;
import javax.security.sasl.SaslClient;
import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.common.security.JaasContext;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.authenticator.DefaultLogin;
import org.apache.kafka.common.security.authenticator.LoginManager;

/** What Kafka's client does before its first SaslAuthenticate request: log in with the JAAS
 *  configuration, build the callback handler, create the mechanism's SASL client inside the login's
 *  Subject and take its first response. Arguments: jaas config, mechanism, callback class, broker host. */
public class SignIamPayload {
    public static void main(String[] args) throws Exception {
        String jaas = args[0], mechanism = args[1], callbackClass = args[2], host = args[3];
        Map<String, Object> configs = new HashMap<>();
        configs.put("sasl.jaas.config", new Password(jaas));
        configs.put("sasl.mechanism", mechanism);
        JaasContext context = JaasContext.loadClientContext(configs);
        LoginManager login = LoginManager.acquireLoginManager(context, mechanism, DefaultLogin.class, configs);
        AuthenticateCallbackHandler handler = (AuthenticateCallbackHandler)
                Class.forName(callbackClass).getDeclaredConstructor().newInstance();
        handler.configure(configs, mechanism, context.configurationEntries());
        Subject subject = login.subject();
        byte[] payload = Subject.doAs(subject, (PrivilegedExceptionAction<byte[]>) () -> {
            SaslClient client = Sasl.createSaslClient(new String[] {mechanism}, null, "kafka", host, configs, handler);
            if (client == null) {
                throw new IllegalStateException("no SASL client for " + mechanism);
            }
            return client.evaluateChallenge(new byte[0]);
        });
        System.out.println("PAYLOAD " + new String(payload, StandardCharsets.UTF_8));
        login.release();
    }
}
