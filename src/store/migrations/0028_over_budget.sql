-- A sponsorship charge checks the budgets in the statement that charges them (relayer/intake/spend-caps.ts),
-- so it can go out with its transaction's COMMIT: the rule's row lock is then held for no client work.
-- Over a limit, the statement calls this, which aborts it with a message the relayer reads back:
-- "metarelay_over_budget:<rule id>:<limit>".
CREATE FUNCTION metarelay_over_budget(rule_id bigint, limit_kind text) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION 'metarelay_over_budget:%:%', rule_id, limit_kind USING ERRCODE = 'P0001';
END
$$;
