-- Token search: every resolved token's traits as (name, value) pairs, and trigram indexes over
-- token names and descriptions.
--
-- The pairs are extracted from the stored (normalised) document by one SQL function, used both by
-- the token save path (in the transaction that saves the document) and by the backfill below:
--   attributes: [{trait_type, value, display_type?}]     -> (trait_type, value)
--   properties: {name: value}                            -> (name, value)
--   properties: {name: {key: value}} (one level nested)  -> ("name.key", value)
-- An array value gives one pair per element. Strings, numbers and booleans are indexed; nulls,
-- objects deeper than one level, empty strings, names over 100 and values over 200 characters are
-- not; names and string values are trimmed. Numbers, and numeric strings whose display_type is a number type, also get value_num.
-- At most 256 pairs per token.
CREATE FUNCTION metarelay_token_pairs(doc jsonb)
RETURNS TABLE (name text, value_text text, value_num numeric, kind text)
LANGUAGE sql IMMUTABLE AS $fn$
  WITH raw AS (
    SELECT a.elem->>'trait_type' AS name, a.elem->'value' AS v, a.ord AS ord, 0::bigint AS sub,
           lower(coalesce(a.elem->>'display_type', '')) IN ('number', 'boost_number', 'boost_percentage', 'date') AS numeric_hint
      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(doc->'attributes') = 'array' THEN doc->'attributes' ELSE '[]'::jsonb END)
           WITH ORDINALITY AS a(elem, ord)
     WHERE jsonb_typeof(a.elem) = 'object' AND jsonb_typeof(a.elem->'trait_type') = 'string'
    UNION ALL
    SELECT p.key, p.value, 1000000 + p.ord, 0, false
      FROM jsonb_each(CASE WHEN jsonb_typeof(doc->'properties') = 'object' THEN doc->'properties' ELSE '{}'::jsonb END)
           WITH ORDINALITY AS p(key, value, ord)
     WHERE jsonb_typeof(p.value) <> 'object'
    UNION ALL
    SELECT p.key || '.' || n.key, n.value, 1000000 + p.ord, n.ord, false
      FROM jsonb_each(CASE WHEN jsonb_typeof(doc->'properties') = 'object' THEN doc->'properties' ELSE '{}'::jsonb END)
           WITH ORDINALITY AS p(key, value, ord)
           CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(p.value) = 'object' THEN p.value ELSE '{}'::jsonb END)
           WITH ORDINALITY AS n(key, value, ord)
  ),
  flat AS (
    SELECT name, v, numeric_hint, false AS in_array, ord, sub, 0::bigint AS elem FROM raw WHERE jsonb_typeof(v) <> 'array'
    UNION ALL
    SELECT r.name, e.v, r.numeric_hint, true, r.ord, r.sub, e.ord
      FROM raw r CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(r.v) = 'array' THEN r.v ELSE '[]'::jsonb END)
           WITH ORDINALITY AS e(v, ord)
  ),
  typed AS (
    SELECT btrim(name) AS name, in_array, ord, sub, elem,
           CASE WHEN jsonb_typeof(v) = 'string' THEN btrim(v #>> '{}') ELSE v::text END AS value_text,
           CASE WHEN jsonb_typeof(v) = 'number' THEN (v::text)::numeric
                WHEN numeric_hint AND jsonb_typeof(v) = 'string' AND btrim(v #>> '{}') ~ '^-?[0-9]{1,60}(\.[0-9]{1,60})?$'
                  THEN btrim(v #>> '{}')::numeric END AS value_num,
           jsonb_typeof(v) AS json_type
      FROM flat
     WHERE jsonb_typeof(v) IN ('string', 'number', 'boolean')
  )
  SELECT name, value_text, value_num,
         CASE WHEN in_array THEN 'array' WHEN value_num IS NOT NULL THEN 'number' ELSE json_type END
    FROM typed
   WHERE length(name) BETWEEN 1 AND 100 AND length(value_text) BETWEEN 1 AND 200
   ORDER BY ord, sub, elem
   LIMIT 256
$fn$;

CREATE TABLE token_properties (
  chain_id         BIGINT NOT NULL,
  contract_address TEXT NOT NULL,
  token_id         TEXT NOT NULL,
  name             TEXT NOT NULL,     -- as the document spells it
  name_key         TEXT NOT NULL,     -- lower(name): names and values compare case-insensitively
  value_text       TEXT NOT NULL,
  value_key        TEXT NOT NULL,     -- lower(value_text)
  value_num        NUMERIC,           -- numbers (INT ranges)
  kind             TEXT NOT NULL,     -- string | number | boolean | array (an element of an array)
  PRIMARY KEY (chain_id, contract_address, name_key, value_key, token_id),
  FOREIGN KEY (chain_id, contract_address, token_id) REFERENCES token_metadata ON DELETE CASCADE
);
CREATE INDEX token_properties_token_idx ON token_properties (chain_id, contract_address, token_id);
CREATE INDEX token_properties_num_idx ON token_properties (chain_id, contract_address, name_key, value_num) WHERE value_num IS NOT NULL;

INSERT INTO token_properties (chain_id, contract_address, token_id, name, name_key, value_text, value_key, value_num, kind)
SELECT t.chain_id, t.contract_address, t.token_id, p.name, lower(p.name), p.value_text, lower(p.value_text), p.value_num, p.kind
  FROM token_metadata t CROSS JOIN LATERAL metarelay_token_pairs(t.metadata) AS p
 WHERE t.metadata IS NOT NULL
ON CONFLICT DO NOTHING;

-- Free-text token search (name and description), typo-tolerant like contract search.
CREATE INDEX token_metadata_name_trgm_idx ON token_metadata USING gin (lower(metadata->>'name') gin_trgm_ops);
CREATE INDEX token_metadata_description_trgm_idx ON token_metadata USING gin (lower(metadata->>'description') gin_trgm_ops);

-- Whether a contract's tokens were ever enumerated (a refreshAll), looked up by every token search.
CREATE INDEX tasks_refresh_all_idx ON tasks (chain_id, contract_address, id) WHERE refresh_all;
