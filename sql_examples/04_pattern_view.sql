-- A pattern view: registers the "three rising ticks" pattern as a temporary view,
-- then queries it with plain SQL (the view works in spark.sql too). Finds, per
-- symbol, runs of at least three consecutive price rises, and keeps the big ones.
-- Runs over the demo stream ticks (symbol, ts, price, volume).
-- demo: yes
CREATE OR REPLACE TEMPORARY VIEW rising_runs AS
SELECT *
FROM ticks
  MATCH_RECOGNIZE (
    PARTITION BY symbol
    ORDER BY ts
    MEASURES
      MATCH_NUMBER()              AS match_num,
      S.ts                        AS start_ts,
      LAST(R.ts)                  AS end_ts,
      S.price                     AS first_price,
      LAST(R.price)               AS last_price,
      CLASSIFIER()                AS last_label
    ONE ROW PER MATCH
    PATTERN (S R{3,})
    DEFINE
      R AS R.price > PREV(R.price)
  ) AS m;

-- Plain SQL over the pattern view: the runs that gained more than 0.1%.
SELECT symbol, match_num, start_ts, end_ts, first_price, last_price,
       round(100 * (last_price - first_price) / first_price, 3) AS gain_pct
FROM rising_runs
WHERE last_price > first_price * 1.001
ORDER BY gain_pct DESC, symbol, match_num;
