"""ESP/SDS CCL built-in functions: name, kind, arity, argument and result types.

Sources: (the key in each entry's trailing comment names the evidence)
  R1: nextval() page, CCL Reference ESP 5.1 SP03
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0513/doc/html/emc1296234198991.html
  R2: valueinserted() page, CCL Reference ESP 5.1 SP03
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0513/doc/html/swa1284669461467.html
  R3: meandeviation() page, CCL Reference ESP 5.1 SP03
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0513/doc/html/swa1290800294979.html
  R4: median() page, CCL Reference ESP 5.1 SP03
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0513/doc/html/swa1290796425297.html
  R5: dateceiling() page (date parts, multiples, to_timestamp format example), CCL Reference ESP 5.1 SP03
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0513/doc/html/cgo1288725526818.html
  R6: datefloor() page, CCL Reference ESP 5.1 SP02
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0512/doc/html/cgo1288725550335.html
  R7: to_string() page (format, time zone; mentions xmlserialize(), hex_string()), CCL Reference ESP 5.1 SP02
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0512/doc/html/emc1298999799288.html
  R8: getrowid() page, CCL Reference ESP 5.1 SP04 (also 5.0: dc01621.0510/emc1302720526399)
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0514/doc/html/emc1302720526399.html
  R9: getCache() page with cacheSize(), deleteCache(), insertCache(), round(x,2) in its example, CCL Reference ESP 5.1 SP04
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0514/doc/html/emc1302720543728.html
  R10: getData() page, CCL Reference ESP 5.1 SP04
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0514/doc/html/vge1312573080739.html
  R11: to_decimal() page, CCL Reference ESP 5.1 SP04
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0514/doc/html/lar1382036829263.html
  R12: weighted_avg() page, CCL Reference ESP 5.1 SP01
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0511/doc/html/swa1288273811566.html
  R13: vwap() page, CCL Reference ESP 5.1 SP01
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0511/doc/html/swa1295561696393.html
  R14: Aggregate Functions overview (count, sum, avg, valueInserted additive; min, max), CCL Reference ESP 5.1 SP01
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0511/doc/html/tem1290025561598.html
  R15: CCL Functions overview (max() as a scalar over a comma-separated list), CCL Reference ESP 5.0
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0510/doc/html/swa1292617706573.html
  R16: stddev_samp() page, CCL Programmers Guide ESP 5.0
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01612.0500/doc/html/swa1288273692482.html
  R17: exp_weighted_avg() page, CCL Programmers Guide ESP 5.0
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01612.0500/doc/html/swa1295559979974.html
  R18: corr() page, CCL Programmers Guide ESP 5.0
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01612.0500/doc/html/swa1300373603880.html
  R19: SPLASH Vectors (new vector, size, push_back, resize), CCL Reference ESP 5.1 SP03
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0513/doc/html/san1311804111672.html
  R20: SPLASH Event Caches (aggregates over buckets) and manual caches / insertCache
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0513/doc/html/san1311804116844.html ; http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0500/doc/html/san1311804117750.html
  R21: SPLASH Record Events (getOpcode(record) -> integer, setOpcode(record, code) -> record)
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0500/doc/html/san1311804109921.html
  R22: SPLASH Tutorial, Operations (print, string(), getOpcode, setOpcode)
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01719.0500/doc/html/san1311804090358.html
  R23: SPLASH Tutorial, Event Caches (keyCache, nth, sum/count/max over a bucket)
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01719.0500/doc/html/san1311804095749.html
  R24: SPLASH Tutorial, Advanced Data Structures (isnull)
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01719.0500/doc/html/san1311804092342.html
  R25: Examples guide, Vectors and Dictionaries (push_back, isnull, new vector)
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01683.0512/doc/html/doa1338928434099.html
  R26: SPLASH Window Iterators (says iterator functions exist; their names were not in the retrieved text)
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0512/doc/html/san1311804115937.html
  R27: Getting Started, Aggregate as a simple query (sum(), CAST(FLOAT, x))
      https://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01622.0500/doc/html/kes1308591150603.html
  R28: Sample project with modules (substr(s,1,1))
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01622.0513/doc/html/kes1342549054266.html
  R29: SAP community blog: smart data streaming, CCLScript functions in a query (to_money(), avg())
      https://community.sap.com/t5/technology-blog-posts-by-sap/smart-data-streaming-using-cclscript-functions-in-a-query/ba-p/13319331
  R30: CCL Reference ESP 5.1 SP12 (table of contents only; function chapter not retrievable)
      https://docslib.org/doc/11091124/ccl-reference-company
  R31: Sybase CEP R4 CCL Reference, NEXTVAL()/DATEFLOOR() (predecessor product; corroboration only)
      https://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01031.0400/doc/html/asc1252677221029.html ; https://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01031.0400/doc/html/cgo1288797744068.html
  R32: GROUP FILTER clause, CCL Reference ESP 5.1 SP03 (rank() ranks the records of a group)
      http://infocenter.sybase.com/help/topic/com.sybase.infocenter.dc01621.0513/doc/html/tem1292512065813.html
  PG: CCL Programmers Guide, error streams (recordDataToString(), recordDataToRecord()); cited in issue 28,
      page not retrieved here
  NOTES: project notes: functions seen in real projects
      /work/shared/notes/ccl-language.md
  LANG: project language notes: left/right/last/like are keywords callable as functions
      /work/main/docs/language.md
  MEM: recalled from the ESP 5.1 CCL Reference function list; no page retrieved in this research

Entries marked "# unverified" are names no retrieved page confirmed; they are kept so that real
projects do not get a false "unknown function" error, and their signatures are loose. Entries with
source MEM but no "# unverified" mark are standard ESP names (trigonometry, to_* conversions, date
parts, trims) whose exact pages were not retrieved; their signatures follow the usual ESP forms.
Not functions (statements or syntax): output, exit, new vector(...), new dictionary(...), typeof(...).
"insertIntoCache" appears only as a user SPLASH function in the getCache() example (R9), not a built-in.
"""
from __future__ import annotations

# kind: "scalar" | "aggregate" | "splash"  (splash = only meaningful in SPLASH code)
# min_args / max_args: max_args None = variadic
# args: a tuple of type patterns for the positional arguments (may be shorter than max_args; the last repeats for variadic),
#   type pattern vocabulary: "integer" "long" "float" "money" "decimal" "string" "boolean" "date" "timestamp"
#   "bigdatetime" "interval" "binary" "numeric" (any of integer/long/float/money/decimal) "temporal" (date/timestamp/bigdatetime)
#   "any" "record" "dictionary" "vector" "eventcache" "type" (a type name argument, as in cast(type, x))
# result: a type name from the same vocabulary, or "arg1" (same type as argument 1), "arg2", "widest" (widest numeric of the args),
#   "elem" (element type of a vector/cache arg), "value" (value type of a dictionary arg), "unknown"
# Conventions used here: "widest" with non-numeric arguments means the type of argument 1; result "temporal" means
#   some date/time type whose exact kind is not documented; for cast(type, x), "arg1" is the named type.
# max/min: one argument = aggregate over the group; two or more = scalar over the arguments (R15).
FUNCTIONS = {
    "abs": dict(kind="scalar", min_args=1, max_args=1, args=("any",), result="arg1",
                doc="absolute value (numeric or interval)"),  # src: MEM
    "acos": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                 doc="arc cosine (radians)"),  # src: MEM
    "ascii": dict(kind="scalar", min_args=1, max_args=1, args=("string",), result="integer",
                  doc="code of the first character"),  # src: NOTES
    "asin": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                 doc="arc sine (radians)"),  # src: MEM
    "atan": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                 doc="arc tangent (radians)"),  # src: MEM
    "atan2": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                  doc="arc tangent of y/x using both signs"),  # src: MEM
    "avg": dict(kind="aggregate", min_args=1, max_args=1, args=("numeric",), result="average",
                doc="average of the group (additive); float for integer, long and float input (ESP 5.0's reference: 'returns type FLOAT'), money and decimals keep their type"),  # src: R14 R20
    "bitand": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "numeric"), result="widest",
                   doc="bitwise AND of integer/long values"),  # unverified; src: MEM
    "bitclear": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "integer"), result="arg1",
                     doc="clear the bit at a position"),  # unverified; src: MEM
    "bitflag": dict(kind="scalar", min_args=1, max_args=1, args=("integer",), result="integer",
                    doc="integer with only the given bit set"),  # unverified; src: MEM
    "bitflaglong": dict(kind="scalar", min_args=1, max_args=1, args=("integer",), result="long",
                        doc="long with only the given bit set"),  # unverified; src: MEM
    "bitmask": dict(kind="scalar", min_args=2, max_args=2, args=("integer", "integer"), result="integer",
                    doc="integer with a range of bits set"),  # unverified; src: MEM
    "bitmasklong": dict(kind="scalar", min_args=2, max_args=2, args=("integer", "integer"), result="long",
                        doc="long with a range of bits set"),  # unverified; src: MEM
    "bitnot": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="arg1",
                   doc="bitwise complement"),  # unverified; src: MEM
    "bitor": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "numeric"), result="widest",
                  doc="bitwise OR"),  # unverified; src: MEM
    "bitset": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "integer"), result="arg1",
                   doc="set the bit at a position"),  # unverified; src: MEM
    "bitshiftleft": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "integer"), result="arg1",
                         doc="shift bits left"),  # unverified; src: MEM
    "bitshiftright": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "integer"), result="arg1",
                          doc="shift bits right"),  # unverified; src: MEM
    "bittest": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "integer"), result="boolean",
                    doc="test the bit at a position (boolean or 0/1)"),  # unverified; src: MEM
    "bittoggle": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "integer"), result="arg1",
                      doc="invert the bit at a position"),  # unverified; src: MEM
    "bitxor": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "numeric"), result="widest",
                   doc="bitwise exclusive OR"),  # unverified; src: MEM
    "cachesize": dict(kind="splash", min_args=1, max_args=1, args=("eventcache",), result="long",
                      doc="number of rows in the current event-cache bucket"),  # src: R9
    "cast": dict(kind="scalar", min_args=2, max_args=2, args=("type", "any"), result="arg1",
                 doc="convert to the named type: cast(type, value); result is the named type"),  # src: R27 NOTES
    "cbrt": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                 doc="cube root"),  # unverified; src: MEM
    "ceil": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="arg1",
                 doc="smallest integral value not less than the argument"),  # src: MEM
    "char": dict(kind="scalar", min_args=1, max_args=1, args=("integer",), result="string",
                 doc="character with the given code"),  # unverified; src: MEM
    "chr": dict(kind="scalar", min_args=1, max_args=1, args=("integer",), result="string",
                doc="character with the given code (Sybase CEP name)"),  # unverified; src: MEM
    "clear": dict(kind="splash", min_args=1, max_args=1, args=("any",), result="unknown",
                  doc="remove all entries from a dictionary or vector"),  # unverified; src: MEM
    "coalesce": dict(kind="scalar", min_args=2, max_args=None, args=("any",), result="arg1",
                     doc="first non-null argument"),  # unverified; src: MEM
    "concat": dict(kind="scalar", min_args=2, max_args=None, args=("string",), result="string",
                   doc="concatenation (the + operator is the documented form)"),  # unverified; src: MEM
    "corr": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                 doc="correlation coefficient of (dependent, independent) pairs"),  # src: R18
    "cos": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                doc="cosine (radians)"),  # src: MEM
    "cosh": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                 doc="hyperbolic cosine"),  # src: MEM
    "count": dict(kind="aggregate", min_args=0, max_args=1, args=("any",), result="integer",
                  doc="number of rows / non-null values; count(*) and count(distinct x) forms (result may be long in some versions)"),  # src: R14 R20 NOTES
    "covar_pop": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                      doc="population covariance of number pairs"),  # unverified; src: MEM
    "covar_samp": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                       doc="sample covariance of number pairs"),  # unverified; src: MEM
    "dateadd": dict(kind="scalar", min_args=3, max_args=3, args=("any", "integer", "temporal"), result="arg3",
                    doc="add n date parts to a date-time"),  # unverified; src: MEM
    "dateceiling": dict(kind="scalar", min_args=2, max_args=3, args=("any", "temporal", "integer"), result="arg2",
                        doc="round a date-time up to a multiple of a date part (yy qq mm wk dd hh mi ss ms)"),  # src: R5
    "datediff": dict(kind="scalar", min_args=3, max_args=3, args=("any", "temporal", "temporal"), result="long",
                     doc="number of date parts between two date-times"),  # unverified; src: MEM
    "datefloor": dict(kind="scalar", min_args=2, max_args=3, args=("any", "temporal", "integer"), result="arg2",
                      doc="round a date-time down to a multiple of a date part"),  # src: R6 R31
    "datepart": dict(kind="scalar", min_args=2, max_args=2, args=("any", "temporal"), result="integer",
                     doc="integer value of a date part"),  # unverified; src: MEM
    "dayofmonth": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                       doc="day of month (optional time zone)"),  # src: MEM
    "dayofweek": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                      doc="day of week (optional time zone)"),  # src: MEM
    "dayofyear": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                      doc="day of year (optional time zone)"),  # src: MEM
    "deletecache": dict(kind="splash", min_args=2, max_args=2, args=("eventcache", "integer"), result="unknown",
                        doc="delete the row at an index of the current bucket"),  # src: R9
    "deleteiterator": dict(kind="splash", min_args=1, max_args=1, args=("any",), result="unknown",
                           doc="release a window iterator"),  # unverified; src: R26
    "distance": dict(kind="scalar", min_args=4, max_args=6, args=("numeric",), result="float",
                     doc="euclidean distance between two 2-D (or 3-D) points"),  # unverified; src: MEM
    "distancesquared": dict(kind="scalar", min_args=4, max_args=6, args=("numeric",), result="float",
                            doc="squared euclidean distance between two points"),  # unverified; src: MEM
    "exp": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                doc="e raised to the argument"),  # src: MEM
    "exp_weighted_avg": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                             doc="exponentially weighted moving average over a period"),  # src: R17
    "first": dict(kind="aggregate", min_args=1, max_args=2, args=("any", "integer"), result="arg1",
                  doc="first value of the group (optional index argument unverified)"),  # src: NOTES
    "firstnonnull": dict(kind="scalar", min_args=1, max_args=None, args=("any",), result="arg1",
                         doc="first non-null argument"),  # unverified; src: MEM
    "floor": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="arg1",
                  doc="largest integral value not greater than the argument"),  # src: MEM
    "getcache": dict(kind="splash", min_args=2, max_args=2, args=("eventcache", "integer"), result="elem",
                     doc="row at a 0-based index of the current bucket"),  # src: R9
    "getdata": dict(kind="splash", min_args=3, max_args=None, args=("vector", "string", "string", "any"), result="arg1",
                    doc="run a query/stored procedure through a database service into a vector of records"),  # src: R10
    "getdate": dict(kind="scalar", min_args=0, max_args=0, args=(), result="timestamp",
                    doc="current system date-time"),  # unverified; src: MEM
    "getiterator": dict(kind="splash", min_args=1, max_args=1, args=("any",), result="unknown",
                        doc="iterator over a window (argument: the implicit <Window>_stream variable)"),  # unverified; src: R26
    "getnext": dict(kind="splash", min_args=1, max_args=1, args=("any",), result="record",
                    doc="next record of a window iterator, null at the end"),  # unverified; src: R26
    "getopcode": dict(kind="scalar", min_args=1, max_args=1, args=("record",), result="integer",
                      doc="operation code of a record event (insert=1 update=3 delete=5 upsert=7 safedelete=13)"),  # src: R21 R22 NOTES
    "getrowid": dict(kind="scalar", min_args=1, max_args=1, args=("record",), result="long",
                     doc="ROWID (64-bit sequence number) of the current row of a stream/window"),  # src: R8 NOTES
    "greatest": dict(kind="scalar", min_args=2, max_args=None, args=("any",), result="widest",
                     doc="largest of the arguments"),  # unverified; src: MEM
    "hex_binary": dict(kind="scalar", min_args=1, max_args=1, args=("string",), result="binary",
                       doc="binary value from a hex string"),  # unverified; src: MEM
    "hex_string": dict(kind="scalar", min_args=1, max_args=1, args=("binary",), result="string",
                       doc="hex string representation of a binary value"),  # src: R7
    "hour": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                 doc="hour 0-23 (optional time zone)"),  # src: MEM
    "insertcache": dict(kind="splash", min_args=2, max_args=2, args=("eventcache", "record"), result="unknown",
                        doc="insert a record into a manual event cache"),  # src: R9 R20
    "instr": dict(kind="scalar", min_args=2, max_args=4, args=("string", "string", "integer", "integer"), result="integer",
                  doc="position of a substring"),  # unverified; src: MEM
    "isnull": dict(kind="scalar", min_args=1, max_args=1, args=("any",), result="boolean",
                   doc="true when the value is null"),  # src: R24 R25 NOTES
    "keycache": dict(kind="splash", min_args=2, max_args=2, args=("eventcache", "record"), result="unknown",
                     doc="select the event-cache bucket for the key of a record"),  # src: R23
    "last": dict(kind="aggregate", min_args=1, max_args=2, args=("any", "integer"), result="arg1",
                 doc="last value of the group (optional index argument unverified); keyword callable as function"),  # src: NOTES LANG
    "lastnonnull": dict(kind="aggregate", min_args=1, max_args=1, args=("any",), result="arg1",
                        doc="last non-null value of the group"),  # unverified; src: MEM
    "least": dict(kind="scalar", min_args=2, max_args=None, args=("any",), result="widest",
                  doc="smallest of the arguments"),  # unverified; src: MEM
    "left": dict(kind="scalar", min_args=2, max_args=2, args=("string", "integer"), result="string",
                 doc="leftmost n characters; keyword callable as function"),  # src: NOTES LANG
    "length": dict(kind="scalar", min_args=1, max_args=1, args=("string",), result="integer",
                   doc="number of characters"),  # src: NOTES
    "like": dict(kind="scalar", min_args=2, max_args=2, args=("string", "string"), result="boolean",
                 doc="SQL LIKE pattern match; keyword callable as function"),  # src: LANG
    "ln": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
               doc="natural logarithm"),  # src: MEM
    "log": dict(kind="scalar", min_args=1, max_args=2, args=("numeric", "numeric"), result="float",
                doc="logarithm (natural, or with explicit base; signature unverified)"),  # src: MEM
    "log10": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                  doc="base-10 logarithm"),  # src: MEM
    "lower": dict(kind="scalar", min_args=1, max_args=1, args=("string",), result="string",
                  doc="lower-case copy"),  # src: NOTES
    "ltrim": dict(kind="scalar", min_args=1, max_args=1, args=("string",), result="string",
                  doc="remove leading spaces"),  # src: MEM
    "max": dict(kind="aggregate", min_args=1, max_args=None, args=("any",), result="widest",
                doc="maximum of the group; with 2+ arguments a scalar maximum of the arguments"),  # src: R14 R15 R20
    "maxof": dict(kind="scalar", min_args=2, max_args=None, args=("any",), result="widest",
                  doc="largest of the arguments"),  # unverified; src: MEM
    "meandeviation": dict(kind="aggregate", min_args=1, max_args=1, args=("numeric",), result="float",
                          doc="mean absolute deviation of the group"),  # src: R3
    "median": dict(kind="aggregate", min_args=1, max_args=1, args=("any",), result="arg1",
                   doc="median of the group (any type but binary; same type as the column)"),  # src: R4
    "microsecond": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                        doc="microsecond part"),  # unverified; src: MEM
    "millisecond": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                        doc="millisecond part"),  # unverified; src: MEM
    "min": dict(kind="aggregate", min_args=1, max_args=None, args=("any",), result="widest",
                doc="minimum of the group; with 2+ arguments a scalar minimum of the arguments"),  # src: R14 R15 R20
    "minof": dict(kind="scalar", min_args=2, max_args=None, args=("any",), result="widest",
                  doc="smallest of the arguments"),  # unverified; src: MEM
    "minute": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                   doc="minute 0-59 (optional time zone)"),  # src: MEM
    "mod": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "numeric"), result="widest",
                doc="remainder (the % operator is the documented form)"),  # unverified; src: MEM
    "month": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                  doc="month 1-12 (optional time zone)"),  # src: MEM
    "nextval": dict(kind="scalar", min_args=0, max_args=0, args=(), result="long",
                    doc="increasing sequence value, first call returns 1"),  # src: R1 R31 NOTES
    "now": dict(kind="scalar", min_args=0, max_args=0, args=(), result="timestamp",
                doc="current system time (exact temporal type unverified: timestamp or bigdatetime)"),  # src: NOTES
    "nth": dict(kind="aggregate", min_args=2, max_args=2, args=("any", "any"), result="arg2",
                doc="n-th value of an (ordered) group or event-cache bucket; argument order (index, expr) unverified"),  # src: R23
    "patindex": dict(kind="scalar", min_args=2, max_args=3, args=("string", "string", "integer"), result="integer",
                     doc="position of the first match of a pattern"),  # unverified; src: MEM
    "pi": dict(kind="scalar", min_args=0, max_args=0, args=(), result="float",
               doc="the constant pi"),  # src: NOTES
    "power": dict(kind="scalar", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                  doc="base raised to exponent"),  # src: MEM
    "print": dict(kind="splash", min_args=1, max_args=None, args=("any",), result="unknown",
                  doc="print values to the server log/stdout"),  # src: R22
    "push_back": dict(kind="splash", min_args=2, max_args=2, args=("vector", "any"), result="arg1",
                      doc="append a value to a vector; returns the vector"),  # src: R19 R25
    "random": dict(kind="scalar", min_args=0, max_args=1, args=("numeric",), result="float",
                   doc="pseudo-random number (optional seed unverified)"),  # src: MEM
    "rank": dict(kind="scalar", min_args=0, max_args=0, args=(), result="integer",
                 doc="rank of the record in its group, by GROUP ORDER BY (GROUP FILTER only)"),  # src: R32
    "recent": dict(kind="aggregate", min_args=1, max_args=1, args=("any",), result="arg1",
                   doc="most recent value of the group"),  # unverified; src: MEM
    "regexp_firstsearch": dict(kind="scalar", min_args=2, max_args=2, args=("string", "string"), result="string",
                               doc="first substring matching a POSIX regular expression"),  # unverified; src: MEM
    "regexp_replace": dict(kind="scalar", min_args=3, max_args=3, args=("string", "string", "string"), result="string",
                           doc="replace the match of a regular expression"),  # unverified; src: MEM
    "regexp_search": dict(kind="scalar", min_args=2, max_args=2, args=("string", "string"), result="boolean",
                          doc="whether/where a regular expression matches"),  # unverified; src: MEM
    "recorddatatorecord": dict(kind="splash", min_args=2, max_args=2, args=("string", "any"), result="record",
                               doc="an error stream's errorRecord as a record of its source's row (streamName, errorRecord)"),  # src: PG
    "recorddatatostring": dict(kind="splash", min_args=2, max_args=2, args=("string", "any"), result="string",
                               doc="an error stream's errorRecord as text (streamName, errorRecord)"),  # src: PG
    "regr_avgx": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                      doc="linear regression: average of the independent variable"),  # unverified; src: MEM
    "regr_avgy": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                      doc="linear regression: average of the dependent variable"),  # unverified; src: MEM
    "regr_count": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="integer",
                       doc="linear regression: number of non-null pairs"),  # unverified; src: MEM
    "regr_intercept": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                           doc="linear regression: y-intercept"),  # unverified; src: MEM
    "regr_r2": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                    doc="linear regression: coefficient of determination"),  # unverified; src: MEM
    "regr_slope": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                       doc="linear regression: slope"),  # unverified; src: MEM
    "regr_sxx": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                     doc="linear regression: sum of squares of the independent variable"),  # unverified; src: MEM
    "regr_sxy": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                     doc="linear regression: sum of products"),  # unverified; src: MEM
    "regr_syy": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                     doc="linear regression: sum of squares of the dependent variable"),  # unverified; src: MEM
    "remove": dict(kind="splash", min_args=2, max_args=2, args=("dictionary", "any"), result="unknown",
                   doc="remove a key from a dictionary"),  # unverified; src: MEM
    "replace": dict(kind="scalar", min_args=3, max_args=3, args=("string", "string", "string"), result="string",
                    doc="replace occurrences of a substring"),  # unverified; src: MEM
    "resetiterator": dict(kind="splash", min_args=1, max_args=1, args=("any",), result="unknown",
                          doc="restart a window iterator"),  # unverified; src: R26
    "resize": dict(kind="splash", min_args=2, max_args=2, args=("vector", "integer"), result="arg1",
                   doc="resize a vector; returns the vector"),  # src: R19
    "right": dict(kind="scalar", min_args=2, max_args=2, args=("string", "integer"), result="string",
                  doc="rightmost n characters; keyword callable as function"),  # src: NOTES LANG
    "round": dict(kind="scalar", min_args=1, max_args=2, args=("numeric", "integer"), result="arg1",
                  doc="round to the given number of decimal places"),  # src: R9
    "rtrim": dict(kind="scalar", min_args=1, max_args=1, args=("string",), result="string",
                  doc="remove trailing spaces"),  # src: MEM
    "second": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                   doc="second 0-59 (optional time zone)"),  # src: MEM
    "setopcode": dict(kind="scalar", min_args=2, max_args=2, args=("record", "integer"), result="arg1",
                      doc="set the operation code of a record in place and return it"),  # src: R21 R22 NOTES
    "setrange": dict(kind="splash", min_args=2, max_args=None, args=("any", "any"), result="unknown",
                     doc="restrict a window iterator to a range of column values"),  # unverified; src: R26
    "setsearch": dict(kind="splash", min_args=2, max_args=None, args=("any", "any"), result="unknown",
                      doc="restrict a window iterator to records matching values"),  # unverified; src: R26
    "sign": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="integer",
                 doc="-1, 0 or 1 according to the sign"),  # src: MEM
    "sin": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                doc="sine (radians)"),  # src: MEM
    "sinh": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                 doc="hyperbolic sine"),  # src: MEM
    "size": dict(kind="splash", min_args=1, max_args=1, args=("any",), result="integer",
                 doc="number of elements of a vector (also dictionary, unverified)"),  # src: R19
    "sqrt": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                 doc="square root"),  # src: NOTES
    "stddev": dict(kind="aggregate", min_args=1, max_args=1, args=("numeric",), result="float",
                   doc="standard deviation (alias of stddev_samp in SQL dialects)"),  # unverified; src: MEM
    "stddev_pop": dict(kind="aggregate", min_args=1, max_args=1, args=("numeric",), result="float",
                       doc="population standard deviation"),  # unverified; src: MEM
    "stddev_samp": dict(kind="aggregate", min_args=1, max_args=1, args=("numeric",), result="float",
                        doc="sample standard deviation"),  # src: R16
    "string": dict(kind="scalar", min_args=1, max_args=1, args=("any",), result="string",
                   doc="convert any value to a string (SPLASH and CCL)"),  # src: R22 NOTES
    "substr": dict(kind="scalar", min_args=2, max_args=3, args=("string", "integer", "integer"), result="string",
                   doc="substring from a 1-based start, optional length"),  # src: R28 NOTES
    "sum": dict(kind="aggregate", min_args=1, max_args=1, args=("any",), result="arg1",
                doc="sum of the group (additive; numeric or interval)"),  # src: R14 R20 R27
    "sysbigdatetime": dict(kind="scalar", min_args=0, max_args=0, args=(), result="bigdatetime",
                           doc="current system time as bigdatetime"),  # unverified; src: MEM
    "sysdate": dict(kind="scalar", min_args=0, max_args=0, args=(), result="date",
                    doc="current system time as date"),  # src: MEM
    "sysseconddate": dict(kind="scalar", min_args=0, max_args=0, args=(), result="date",
                          doc="current system time truncated to seconds"),  # unverified; src: MEM
    "systimestamp": dict(kind="scalar", min_args=0, max_args=0, args=(), result="timestamp",
                         doc="current system time as timestamp"),  # src: MEM
    "tan": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                doc="tangent (radians)"),  # src: MEM
    "tanh": dict(kind="scalar", min_args=1, max_args=1, args=("numeric",), result="float",
                 doc="hyperbolic tangent"),  # src: MEM
    "to_bigdatetime": dict(kind="scalar", min_args=1, max_args=3, args=("any", "string", "string"), result="bigdatetime",
                           doc="convert (string with optional format code and time zone, or temporal/number) to bigdatetime"),  # src: MEM
    "to_binary": dict(kind="scalar", min_args=1, max_args=1, args=("any",), result="binary",
                      doc="convert to binary"),  # src: MEM
    "to_boolean": dict(kind="scalar", min_args=1, max_args=1, args=("any",), result="boolean",
                       doc="convert to boolean"),  # src: MEM
    "to_date": dict(kind="scalar", min_args=1, max_args=3, args=("any", "string", "string"), result="date",
                    doc="convert (string with optional format code and time zone) to date"),  # src: MEM
    "to_decimal": dict(kind="scalar", min_args=3, max_args=3, args=("any", "integer", "integer"), result="decimal",
                       doc="convert to decimal(precision 1..34, scale 0..precision); NULL if it does not fit"),  # src: R11 NOTES
    "to_float": dict(kind="scalar", min_args=1, max_args=1, args=("any",), result="float",
                     doc="convert to float"),  # src: NOTES
    "to_integer": dict(kind="scalar", min_args=1, max_args=1, args=("any",), result="integer",
                       doc="convert to integer"),  # src: MEM
    "to_interval": dict(kind="scalar", min_args=1, max_args=1, args=("any",), result="interval",
                        doc="convert to interval (microseconds)"),  # src: MEM
    "to_long": dict(kind="scalar", min_args=1, max_args=1, args=("any",), result="long",
                    doc="convert to long"),  # src: MEM
    "to_money": dict(kind="scalar", min_args=1, max_args=2, args=("any", "integer"), result="money",
                     doc="convert to money (optional scale for money(n), signature unverified)"),  # src: R29
    "to_string": dict(kind="scalar", min_args=1, max_args=3, args=("any", "string", "string"), result="string",
                      doc="convert to string; optional format (date/time or numeric) and time zone"),  # src: R7
    "to_timestamp": dict(kind="scalar", min_args=1, max_args=3, args=("any", "string", "string"), result="timestamp",
                         doc="convert (string with optional format code and time zone) to timestamp"),  # src: R5
    "trim": dict(kind="scalar", min_args=1, max_args=1, args=("string",), result="string",
                 doc="remove leading and trailing spaces"),  # src: MEM
    "trunc": dict(kind="scalar", min_args=1, max_args=2, args=("numeric", "integer"), result="arg1",
                  doc="truncate to the given number of decimal places"),  # unverified; src: MEM
    "uniqueval": dict(kind="scalar", min_args=0, max_args=0, args=(), result="long",
                      doc="unique value per call"),  # unverified; src: MEM
    "upper": dict(kind="scalar", min_args=1, max_args=1, args=("string",), result="string",
                  doc="upper-case copy"),  # src: NOTES
    "valueinserted": dict(kind="aggregate", min_args=1, max_args=1, args=("any",), result="arg1",
                          doc="value computed from the last row inserted/updated into the group (additive)"),  # src: R2 R14
    "var_pop": dict(kind="aggregate", min_args=1, max_args=1, args=("numeric",), result="float",
                    doc="population variance"),  # unverified; src: MEM
    "var_samp": dict(kind="aggregate", min_args=1, max_args=1, args=("numeric",), result="float",
                     doc="sample variance"),  # unverified; src: MEM
    "variance": dict(kind="aggregate", min_args=1, max_args=1, args=("numeric",), result="float",
                     doc="variance (alias of var_samp in SQL dialects)"),  # unverified; src: MEM
    "vwap": dict(kind="aggregate", min_args=2, max_args=2, args=("numeric", "numeric"), result="float",
                 doc="volume-weighted average price (price, quantity)"),  # src: R13
    "weekofyear": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                       doc="week of year"),  # unverified; src: MEM
    "weighted_avg": dict(kind="aggregate", min_args=1, max_args=1, args=("any",), result="arg1",
                         doc="linearly age-weighted moving average (newest event weighs most); numeric, timestamp or interval"),  # src: R12
    "xmlagg": dict(kind="aggregate", min_args=1, max_args=1, args=("any",), result="unknown",
                   doc="concatenates the XML values of the group"),  # unverified; src: MEM
    "xmlcomment": dict(kind="scalar", min_args=1, max_args=1, args=("string",), result="unknown",
                       doc="XML comment node"),  # unverified; src: MEM
    "xmlconcat": dict(kind="scalar", min_args=1, max_args=None, args=("any",), result="unknown",
                      doc="concatenate XML values"),  # unverified; src: MEM
    "xmlelement": dict(kind="scalar", min_args=1, max_args=None, args=("any",), result="unknown",
                       doc="build an XML element (name, attributes, content)"),  # unverified; src: MEM
    "xmlparse": dict(kind="scalar", min_args=1, max_args=1, args=("string",), result="unknown",
                     doc="parse a string into an XML value"),  # unverified; src: MEM
    "xmlserialize": dict(kind="scalar", min_args=1, max_args=1, args=("any",), result="string",
                         doc="serialize an XML value to a string"),  # src: R7
    "year": dict(kind="scalar", min_args=1, max_args=2, args=("temporal", "string"), result="integer",
                 doc="year (optional time zone)"),  # src: MEM
}


# The GROUP BY aggregates the per-instance engine runs (runtime/engine/aggregate.py; a test keeps
# the two in step). Aggregates over an event cache are ccl.splash.caches.AGGREGATES.
ENGINE_AGGREGATES = frozenset({
    "avg", "corr", "count", "covar_pop", "covar_samp", "exp_weighted_avg", "first", "last",
    "lastnonnull", "max", "meandeviation", "median", "min", "nth", "regr_avgx", "regr_avgy", "regr_count",
    "regr_intercept", "regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_syy", "stddev",
    "stddev_pop", "stddev_samp", "sum", "valueinserted", "var_pop", "var_samp", "variance", "vwap",
    "weighted_avg"})


# Date parts of dateadd/datediff/datepart/datefloor/dateceiling, by every name ESP accepts.
DATE_PARTS = {
    "yy": "year", "yyyy": "year", "year": "year",
    "qq": "quarter", "quarter": "quarter",
    "mm": "month", "month": "month",
    "wk": "week", "week": "week",
    "dd": "day", "day": "day",
    "dy": "dayofyear", "dayofyear": "dayofyear",
    "dw": "weekday", "weekday": "weekday",
    "hh": "hour", "hour": "hour",
    "mi": "minute", "minute": "minute",
    "ss": "second", "second": "second",
    "ms": "millisecond", "millisecond": "millisecond",
    "us": "microsecond", "microsecond": "microsecond",
}
# The functions whose first argument is a date part (ESP also writes it as a bare keyword).
DATE_PART_FUNCTIONS = frozenset({"dateadd", "datediff", "datepart", "datefloor", "dateceiling"})
