-- EIP-7702 (issue 18): the authorization a meta-transaction brings ({chainId, implementation, nonce,
-- signature} as JSON text; NULL: none). The dispatcher carries it in a type-4 transaction while the EOA
-- is not yet delegated to that implementation; replacements read it back from the signed attempt.
ALTER TABLE meta_txns ADD COLUMN "authorization" TEXT;
