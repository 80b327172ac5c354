-- Volume spike: a normal tick (BASE) followed by one or more ticks trading more than
-- five times its volume (SPIKE+), ended by a tick back under twice BASE's volume
-- (CALM). ALL ROWS PER MATCH: one output row per tick of each spike, labelled with
-- CLASSIFIER(), with running measures (the spike volume so far) and a FINAL one
-- (when the spike ended).
-- Runs over the demo stream ticks (symbol, ts, price, volume).
-- demo: yes
SELECT *
FROM ticks
  MATCH_RECOGNIZE (
    PARTITION BY symbol
    ORDER BY ts
    MEASURES
      MATCH_NUMBER()            AS match_num,
      CLASSIFIER()              AS label,
      FIRST(BASE.volume)        AS base_volume,
      LAST(SPIKE.volume)        AS last_spike_volume,
      SUM(SPIKE.volume)         AS spike_volume_so_far,
      FINAL LAST(SPIKE.ts)      AS spike_end_ts
    ALL ROWS PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (BASE SPIKE+ CALM)
    DEFINE
      SPIKE AS SPIKE.volume > 5 * BASE.volume,
      CALM  AS CALM.volume < 2 * BASE.volume
  ) AS m;
