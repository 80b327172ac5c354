-- Shoplifting (SASE+ paper, Figure 1, Query 1): per RFID tag, a shelf reading followed
-- by an exit reading within 12 hours with no register (checkout) reading in between --
-- an item taken out of the shop without paying. CEP mode: SEQ with a negated item
-- NOT(b), skip-till-next-match event selection (readings of other tags and repeated
-- shelf readings are skipped), PARTITION BY tag_id for the paper's [tag_id]
-- equivalence test. AFTER MATCH SKIP PAST LAST ROW reports each exit once.
-- Runs over the demo stream rfid (ts, tag_id, reader) from cepsql.datagen.generate_rfid.
-- demo: yes
SELECT *
FROM rfid
  MATCH_RECOGNIZE (
    PARTITION BY tag_id
    ORDER BY ts
    MEASURES
      MATCH_NUMBER()  AS match_num,
      a.ts            AS shelf_ts,
      c.ts            AS exit_ts
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    STRATEGY SKIP_TILL_NEXT_MATCH
    PATTERN (SEQ(a, NOT(b), c))
    WITHIN INTERVAL '12' HOUR
    DEFINE
      a AS a.reader = 'shelf',
      b AS b.reader = 'register',
      c AS c.reader = 'exit'
  ) AS m;
