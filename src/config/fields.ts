import { z } from 'zod';

// Field types the config schemas share.

export const Address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 20-byte 0x address');
export const Decimal = z.string().regex(/^\d+(\.\d+)?$/, 'must be a decimal number as a string, e.g. "0.0004"');
export const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });
