-- V-shape: per symbol, a price that falls for one or more ticks and then rises for
-- one or more ticks. One row per match with where the V started, bottomed and ended.
-- Runs over the demo stream ticks (symbol, ts, price, volume).
-- demo: yes
SELECT *
FROM ticks
  MATCH_RECOGNIZE (
    PARTITION BY symbol
    ORDER BY ts
    MEASURES
      MATCH_NUMBER()     AS match_num,
      STRT.ts            AS start_ts,
      STRT.price         AS start_price,
      LAST(DOWN.price)   AS bottom_price,
      LAST(UP.ts)        AS end_ts,
      LAST(UP.price)     AS end_price,
      CLASSIFIER()       AS last_label
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (STRT DOWN+ UP+)
    DEFINE
      DOWN AS DOWN.price < PREV(DOWN.price),
      UP   AS UP.price > PREV(UP.price)
  ) AS m;
