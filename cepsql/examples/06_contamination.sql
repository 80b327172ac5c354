-- Contamination (SASE+ paper, Figure 1, Query 2): after an alert for a contaminated
-- site, every series of shipments that could carry the contamination on within 3
-- hours -- the first leaves the alert's site, each next one leaves the site where the
-- previous one arrived (KL(b) with LAST(b.to_site, 1), the paper's b[i-1].to).
-- Skip-till-any-match keeps every alternative series: the transitive closure of the
-- spread, one row per series (prefixes included), numbered by MATCH_NUMBER().
-- Runs over the demo stream shipments (ts, kind, site, shipment_id, from_site,
-- to_site) from cepsql.datagen.generate_shipments.
-- demo: yes
SELECT *
FROM shipments
  MATCH_RECOGNIZE (
    ORDER BY ts
    MEASURES
      MATCH_NUMBER()          AS match_num,
      a.site                  AS contaminated_site,
      a.ts                    AS alert_ts,
      count(b.*)              AS hops,
      FIRST(b.shipment_id)    AS first_shipment,
      LAST(b.shipment_id)     AS last_shipment,
      LAST(b.to_site)         AS reached_site,
      LAST(b.ts)              AS reached_ts
    ONE ROW PER MATCH
    STRATEGY SKIP_TILL_ANY_MATCH
    PATTERN (SEQ(a, KL(b)))
    WITHIN INTERVAL '3' HOUR
    DEFINE
      a AS a.kind = 'alert',
      b AS b.kind = 'shipment'
           AND b.from_site = COALESCE(LAST(b.to_site, 1), a.site)
  ) AS m;
