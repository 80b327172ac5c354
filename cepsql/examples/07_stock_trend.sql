-- Stock trend (SASE+ paper, Figure 1, Query 3): per symbol, a run that starts on a
-- high volume (a[1].volume > 1000), in which every further tick's price beats the
-- average price of the run so far (a gradual, not necessarily monotonic rise), ended
-- by a tick whose volume plummets below 80% of the run's last volume. CEP mode:
-- KL(a, 3) (three or more trend ticks, so a trend is more than a tick or two) and
-- skip-till-next-match, which skips ticks that do not fit the trend. The paper's
-- window is 1 hour of a real feed; the demo feed has ~100 ticks a second, so the
-- window here is 2 seconds. AFTER MATCH SKIP PAST LAST ROW keeps non-overlapping trends.
-- Runs over the demo stream ticks (symbol, ts, price, volume).
-- demo: yes
SELECT *
FROM ticks
  MATCH_RECOGNIZE (
    PARTITION BY symbol
    ORDER BY ts
    MEASURES
      MATCH_NUMBER()          AS match_num,
      FIRST(a.ts)             AS start_ts,
      FIRST(a.volume)         AS start_volume,
      count(a.*)              AS trend_ticks,
      ROUND(avg(a.price), 2)  AS avg_price,
      LAST(a.price)           AS last_price,
      LAST(a.volume)          AS last_volume,
      b.ts                    AS drop_ts,
      b.volume                AS drop_volume
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    STRATEGY SKIP_TILL_NEXT_MATCH
    PATTERN (SEQ(KL(a, 3), b))
    WITHIN INTERVAL '2' SECOND
    DEFINE
      a AS FIRST(a.volume) > 1000
           AND (count(a.*) = 1 OR a.price > (sum(a.price) - a.price) / (count(a.*) - 1)),
      b AS b.volume < 0.8 * LAST(a.volume)
  ) AS m;
