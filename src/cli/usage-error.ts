/** A mistake in how the CLI was called: printed with the usage, exit 2. Its own file: every command throws it and main.ts loads the commands, so defining it there made one import circle of cli/. */
export class UsageError extends Error {}
