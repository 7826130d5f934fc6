// What Debezium connectors make of one configuration, as Kafka Connect's validate endpoint asks them: each
// plugin folder's connector class loaded in a class loader of its own (as Kafka Connect and MSK Connect
// load a plugin), its ConfigDef's keys and the errors of its validate(). Run as a source file:
//   java -cp <Kafka Connect's jars> ConnectorConfigCheck.java <connector class> <properties file> <plugin folder>...
// Prints, per folder, "plugin F", "version V", "key K" for each key the connector defines, then
// "error K: message" for each setting validate() refuses.
import java.io.File;
import java.io.FileReader;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.connect.connector.Connector;

public class ConnectorConfigCheck {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    try (FileReader in = new FileReader(args[1])) {
      props.load(in);
    }
    Map<String, String> config = new HashMap<>();
    props.stringPropertyNames().forEach(name -> config.put(name, props.getProperty(name)));
    for (int i = 2; i < args.length; i++) {
      System.out.println("plugin " + args[i]);
      check(args[0], new File(args[i]), config);
    }
  }

  static void check(String connectorClass, File folder, Map<String, String> config) throws Exception {
    List<URL> urls = new ArrayList<>();
    for (File jar : folder.listFiles((dir, name) -> name.endsWith(".jar"))) {
      urls.add(jar.toURI().toURL());
    }
    ClassLoader plugin = new URLClassLoader(urls.toArray(new URL[0]), ConnectorConfigCheck.class.getClassLoader());
    Thread.currentThread().setContextClassLoader(plugin);
    Connector connector = (Connector) Class.forName(connectorClass, true, plugin).getDeclaredConstructor().newInstance();
    System.out.println("version " + connector.version());
    for (String key : new TreeSet<>(connector.config().configKeys().keySet())) {
      System.out.println("key " + key);
    }
    for (ConfigValue value : connector.validate(config).configValues()) {
      for (String message : value.errorMessages()) {
        System.out.println("error " + value.name() + ": " + message.replace('\n', ' '));
      }
    }
  }
}
