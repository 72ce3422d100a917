package dev.eqdv.interop;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** `--name value`, `--name=value` and `--flag` options of one subcommand; unknown ones fail. */
final class Args {
  private final String command;
  private final Map<String, String> values = new HashMap<>();
  private final Set<String> flags = new HashSet<>();

  private Args(String command) {
    this.command = command;
  }

  /**
   * Parses {@code argv} (after the subcommand) allowing the value options {@code valued} and the
   * boolean options {@code booleans}, names without the dashes.
   */
  static Args parse(String command, List<String> argv, Set<String> valued, Set<String> booleans) {
    Args args = new Args(command);
    for (int i = 0; i < argv.size(); i++) {
      String arg = argv.get(i);
      if (!arg.startsWith("--") || arg.length() == 2) {
        throw new UsageException(command + ": unexpected argument '" + arg + "'");
      }
      String name = arg.substring(2);
      String value = null;
      int eq = name.indexOf('=');
      if (eq >= 0) {
        value = name.substring(eq + 1);
        name = name.substring(0, eq);
      }
      if (booleans.contains(name)) {
        if (value != null) {
          throw new UsageException(command + ": --" + name + " takes no value");
        }
        args.flags.add(name);
      } else if (valued.contains(name)) {
        if (value == null) {
          if (i + 1 >= argv.size()) {
            throw new UsageException(command + ": --" + name + " needs a value");
          }
          value = argv.get(++i);
        }
        if (args.values.put(name, value) != null) {
          throw new UsageException(command + ": --" + name + " given twice");
        }
      } else {
        throw new UsageException(command + ": unknown option --" + name);
      }
    }
    return args;
  }

  String required(String name) {
    String v = values.get(name);
    if (v == null || v.isEmpty()) {
      throw new UsageException(command + ": --" + name + " is required");
    }
    return v;
  }

  String get(String name, String fallback) {
    String v = values.get(name);
    return v == null ? fallback : v;
  }

  boolean has(String name) {
    return values.containsKey(name) || flags.contains(name);
  }

  boolean flag(String name) {
    return flags.contains(name);
  }

  long longValue(String name, long fallback, long min, long max) {
    String v = values.get(name);
    if (v == null) {
      return fallback;
    }
    long n;
    try {
      n = Long.parseLong(v.trim());
    } catch (NumberFormatException e) {
      throw new UsageException(command + ": --" + name + " expects an integer, got '" + v + "'");
    }
    if (n < min || n > max) {
      throw new UsageException(
          command + ": --" + name + " must be between " + min + " and " + max + ", got " + n);
    }
    return n;
  }

  int intValue(String name, int fallback, int min, int max) {
    return (int) longValue(name, fallback, min, max);
  }

  /** Bad usage: exit code 2 with the message. */
  static final class UsageException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }
}
