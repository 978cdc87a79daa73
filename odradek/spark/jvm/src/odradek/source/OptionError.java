package odradek.source;

/**
 * An invalid option of the {@code odradek-files} source. The message starts with
 * {@code option '<name>':}, the option as a user spells it, as the Python source's
 * {@code OdradekOptionError} does, so a bad option is easy to find.
 */
public final class OptionError extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  public OptionError(String option, String problem) {
    super("option '" + option + "': " + problem);
  }
}
