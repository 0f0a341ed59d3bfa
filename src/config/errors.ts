/** A configuration that cannot be used, with every problem found (the boot refuses it and says why). */
export class ConfigError extends Error {
  constructor(
    message: string,
    readonly problems: string[] = [],
  ) {
    super(problems.length ? `${message}\n  - ${problems.join('\n  - ')}` : message);
    this.name = 'ConfigError';
  }
}
