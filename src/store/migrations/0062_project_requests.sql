-- A project's recent requests for the console's request log (access/request-journal.ts): when, which
-- method, the answer's status and latency, the access key's id and the client's network (IPv4 /24, IPv6
-- by clientIpv6Prefix); never the key itself, never a query string. Bounded: each flush keeps the newest
-- console.requestLog.keepPerProject rows of the projects it wrote to.
CREATE TABLE project_requests (
  id         BIGSERIAL PRIMARY KEY,
  project_id BIGINT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  key_id     BIGINT,
  at         TIMESTAMPTZ NOT NULL,
  method     TEXT NOT NULL,
  status     INTEGER NOT NULL,
  ms         REAL NOT NULL,
  client_net TEXT
);
CREATE INDEX project_requests_project_idx ON project_requests (project_id, id DESC);
