-- Rise then drop: a tick A, then a run of strictly rising prices B+, then a tick C
-- below the top of the run. One row per match: where it started, the top, the gain and the run length.
-- Runs over the demo stream ticks (symbol, ts, price, volume).
-- demo: yes
SELECT *
FROM ticks
  MATCH_RECOGNIZE (
    PARTITION BY symbol
    ORDER BY ts
    MEASURES
      MATCH_NUMBER()               AS match_num,
      FIRST(A.ts)                  AS start_ts,
      A.price                      AS start_price,
      LAST(B.price)                AS top_price,
      C.price                      AS drop_price,
      ROUND(LAST(B.price) - A.price, 2) AS gain,
      COUNT(B.price)               AS rising_ticks
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B+ C)
    DEFINE
      B AS B.price > PREV(B.price),
      C AS C.price < PREV(C.price)
  ) AS m;
