-- A search of one or two characters (SearchContracts) reads its name-prefix tier from one of these in
-- rank order (curated first, then shorter names, then the tiebreak) and stops at the page: it no longer
-- reads and sorts every name the prefix matches (3 500 of 100 000 for "ko", bench/contract-search.ts).
CREATE INDEX contracts_name_head1_idx ON contracts (left(lower(name), 1), curated DESC, length(name), lower(name), chain_id, address);
CREATE INDEX contracts_name_head2_idx ON contracts (left(lower(name), 2), curated DESC, length(name), lower(name), chain_id, address);
