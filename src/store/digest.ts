import { createHash } from 'node:crypto';

/**
 * What the database keeps of a high-entropy random secret (access keys, admin tokens, console
 * sessions): its SHA-256, in hex. The secrets are long random strings, so a slow hash would add nothing.
 */
export const secretDigest = (secret: string): string => createHash('sha256').update(secret, 'utf8').digest('hex');
