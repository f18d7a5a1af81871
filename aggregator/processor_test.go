package aggregator

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

// fixtureNS is the namespace id of the items in testdata.
const fixtureNS = "nsFixture01"

// fixture is a processor on a fresh table at a fixed clock, for the stream
// events in testdata.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	client *dynamodb.Client
	rec    *ddblocal.Recorder // the processor's calls
	table  string
	proc   *Processor
}

func newFixture(t *testing.T, now time.Time) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), rec: &ddblocal.Recorder{}}
	f.client = ddblocal.Client(t)
	f.table = ddblocal.TableName(t)
	_, err := limiter.OpenDynamoDB(f.ctx, f.client, func(o *limiter.DynamoDBOptions) {
		o.Table = f.table
		o.CreateTable = true
	})
	require.NoError(t, err, "OpenDynamoDB")
	t.Cleanup(func() {
		_, _ = f.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(f.table)})
	})
	f.proc, err = NewProcessor(ddblocal.Client(t, f.rec.Option()), f.table, func(o *Options) { o.Now = func() time.Time { return now } })
	require.NoError(t, err)
	return f
}

// load reads testdata/name.
func loadEvent(t *testing.T, name string) events.DynamoDBEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var ev events.DynamoDBEvent
	require.NoError(t, json.Unmarshal(b, &ev))
	return ev
}

// put writes a stream image to the table as an item.
func (f *fixture) put(img map[string]events.DynamoDBAttributeValue) {
	f.t.Helper()
	item, err := convertImage(img)
	require.NoError(f.t, err)
	_, err = f.client.PutItem(f.ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item})
	require.NoError(f.t, err)
}

// get reads an item; nil when missing.
func (f *fixture) get(pk, sk string) map[string]types.AttributeValue {
	f.t.Helper()
	out, err := f.client.GetItem(f.ctx, &dynamodb.GetItemInput{
		TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: sk}},
	})
	require.NoError(f.t, err)
	return out.Item
}

// n reads a number attribute (failing when it is missing).
func (f *fixture) n(item map[string]types.AttributeValue, attr string) int64 {
	f.t.Helper()
	v, ok := item[attr].(*types.AttributeValueMemberN)
	require.True(f.t, ok, "attribute %s = %#v, want a number", attr, item[attr])
	x, err := strconv.ParseInt(v.Value, 10, 64)
	require.NoError(f.t, err)
	return x
}

func (f *fixture) s(item map[string]types.AttributeValue, attr string) string {
	f.t.Helper()
	v, ok := item[attr].(*types.AttributeValueMemberS)
	require.True(f.t, ok, "attribute %s = %#v, want a string", attr, item[attr])
	return v.Value
}

// bucketPK is the PK of a fixture bucket item.
func bucketPK(entity, resource string, shard int) string {
	return fixtureNS + "/BUCKET#" + entity + "#" + resource + "#" + strconv.Itoa(shard)
}

// checkSnapshot checks the counters and total_events of the snapshot item
// of one window type, and its keys.
func (f *fixture) checkSnapshot(entity, resource, windowStart, window string, counters map[string]int64, events int64) {
	f.t.Helper()
	item := f.get(fixtureNS+"/ENTITY#"+entity, "#USAGE#"+resource+"#"+windowStart+"#"+window)
	require.NotNil(f.t, item, "no snapshot %s/%s %s", entity, resource, windowStart)
	for name, want := range counters {
		assert.Equal(f.t, want, f.n(item, name), "snapshot %s %s", windowStart, name)
	}
	assert.Equal(f.t, events, f.n(item, "total_events"), "snapshot %s total_events", windowStart)
	_, ok := item["wcu"]
	assert.False(f.t, ok, "snapshot %s counts the hidden wcu limit", windowStart)
	for attr, want := range map[string]string{
		"entity_id": entity, "resource": resource, "window": window, "window_start": windowStart,
		"GSI2PK": fixtureNS + "/RESOURCE#" + resource, "GSI2SK": "USAGE#" + windowStart + "#" + entity + "#" + window,
		"GSI4PK": fixtureNS, "GSI4SK": fixtureNS + "/ENTITY#" + entity,
	} {
		assert.Equal(f.t, want, f.s(item, attr), "snapshot %s %s", windowStart, attr)
	}
}

// The fixtures' event time, 2026-03-04T05:06:07Z, and the processor clock.
var (
	fixtureEventTime = time.Unix(1772600767, 0).UTC()
	fixtureNow       = fixtureEventTime.Add(time.Minute)
	refillNow        = time.UnixMilli(1767225600000 + 30_000).UTC() // rf + 30 s
)

func TestProcessorFixtures(t *testing.T) {
	const hour, day = "2026-03-04T05:00:00Z", "2026-03-04T00:00:00Z"
	tests := []struct {
		file  string
		now   time.Time
		setup func(f *fixture, ev events.DynamoDBEvent)
		check func(f *fixture, res Result)
		calls string // the processor's DynamoDB calls
	}{{
		// The creation's consumption counts (the original drops it):
		// 3 rpm, 500 tpm, two limit deltas; wcu never. No refill: the
		// balances cover it.
		file:  "insert_bucket.json",
		now:   fixtureNow,
		calls: "TransactWriteItems",
		check: func(f *fixture, res Result) {
			f.checkSnapshot("C", "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 3, "tpm": 500}, 2)
			f.checkSnapshot("C", "gpt", day, store.WindowDaily, map[string]int64{"rpm": 3, "tpm": 500}, 2)
			assert.EqualValues(t, 2, res.SnapshotsUpdated, "result = %+v", res)
			assert.EqualValues(t, 0, res.RefillsWritten, "result = %+v", res)
		},
	}, {
		// +2 rpm and a refund of 100 tpm (negative), windowed by the event
		// time, not rf.
		file:  "modify_bucket.json",
		now:   fixtureNow,
		calls: "TransactWriteItems",
		check: func(f *fixture, res Result) {
			f.checkSnapshot("C", "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 2, "tpm": -100}, 2)
			f.checkSnapshot("C", "gpt", day, store.WindowDaily, map[string]int64{"rpm": 2, "tpm": -100}, 2)
		},
	}, {
		// The same write taking a slot of an in-flight limit (the limit
		// calls.slots.1772600 of the item: a generation's slots): slots
		// are held, not consumed, and each generation is a limit of its
		// own, so no snapshot counts them.
		file:  "modify_bucket_slots.json",
		now:   fixtureNow,
		calls: "TransactWriteItems",
		check: func(f *fixture, res Result) {
			f.checkSnapshot("C", "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 2, "tpm": -100}, 2)
			f.checkSnapshot("C", "gpt", day, store.WindowDaily, map[string]int64{"rpm": 2, "tpm": -100}, 2)
			item := f.get(fixtureNS+"/ENTITY#C", "#USAGE#gpt#"+hour+"#"+store.WindowHourly)
			require.NotContains(f.t, item, "calls.slots.1772600")
		},
	}, {
		// A write that moved only the item's write identifiers (wid0 to
		// wid3, kept by the limiter's writes so that a retried write is
		// recognised) consumed nothing: no snapshot.
		file:  "modify_write_ids.json",
		now:   fixtureNow,
		calls: "",
		check: func(f *fixture, res Result) {
			assert.EqualValues(t, 1, res.Processed, "result = %+v", res)
			assert.EqualValues(t, 0, res.SnapshotsUpdated, "result = %+v", res)
		},
	}, {
		// TTL deletions of an audit event (archival off) and of a bucket:
		// nothing to write, nothing failed.
		file:  "remove_ttl.json",
		now:   fixtureNow,
		calls: "",
		check: func(f *fixture, res Result) {
			assert.EqualValues(t, 2, res.Processed, "result = %+v", res)
			assert.EqualValues(t, 0, res.SnapshotsUpdated, "result = %+v", res)
			assert.EqualValues(t, 0, res.EventsArchived, "result = %+v", res)
		},
	}, {
		// The original's refill example: 30 s at 100,000,000 per 60 s
		// refills 50,000,000, which does not cover the batch's
		// 60,000,000: written, rf moved.
		// The record's event time, 00:00:30 on the 1st, starts an hour
		// and a day at one instant: each window is an item of its own
		// holding the 60,000 tokens once (one transaction for both).
		file:  "refill_written.json",
		now:   refillNow,
		setup: putLastImages,
		calls: "TransactWriteItems, UpdateItem",
		check: func(f *fixture, res Result) {
			f.checkSnapshot("L", "api", "2026-01-01T00:00:00Z", store.WindowHourly, map[string]int64{"tpm": 60_000}, 1)
			f.checkSnapshot("L", "api", "2026-01-01T00:00:00Z", store.WindowDaily, map[string]int64{"tpm": 60_000}, 1)
			assert.Nil(t, f.get(fixtureNS+"/ENTITY#L", "#USAGE#api#2026-01-01T00:00:00Z"), "an item of the shared layout was written")
			item := f.get(bucketPK("L", "api", 0), "#STATE")
			assert.EqualValues(t, 50_000_000, f.n(item, "b_tpm_tk"), "tk")
			assert.Equal(t, refillNow.UnixMilli(), f.n(item, "rf"), "rf")
			assert.EqualValues(t, 60_000_000, f.n(item, "b_tpm_tc"), "tc")
			assert.EqualValues(t, 1, res.RefillsWritten, "result = %+v", res)
		},
	}, {
		// The same refill with 40,000,000 consumed: the refilled 50,000,000
		// covers it, so nothing is written (the one call writes the hourly
		// and the daily snapshot).
		file:  "refill_covered.json",
		now:   refillNow,
		setup: putLastImages,
		calls: "TransactWriteItems",
		check: func(f *fixture, res Result) {
			item := f.get(bucketPK("L", "api", 0), "#STATE")
			tk, rf := f.n(item, "b_tpm_tk"), f.n(item, "rf")
			assert.EqualValues(t, 0, tk, "tk, rf = %d, %d; want the item untouched", tk, rf)
			assert.EqualValues(t, 1767225600000, rf, "tk, rf = %d, %d; want the item untouched", tk, rf)
			assert.EqualValues(t, 0, res.RefillsWritten, "result = %+v", res)
		},
	}, {
		// The same refill on two shards: each owns half the capacity and
		// rate, so shard 0 gets 25,000,000.
		file:  "refill_two_shards.json",
		now:   refillNow,
		setup: putLastImages,
		calls: "TransactWriteItems, UpdateItem",
		check: func(f *fixture, res Result) {
			assert.EqualValues(t, 25_000_000, f.n(f.get(bucketPK("L", "api", 0), "#STATE"), "b_tpm_tk"), "tk")
		},
	}, {
		// A doubling 2 → 4 on shard 0: shard 1 gets the new count, shards 2
		// and 3 are created whole.
		file: "propagate_shards.json",
		now:  fixtureNow,
		setup: func(f *fixture, ev events.DynamoDBEvent) {
			putLastImages(f, ev)
			shard1 := cloneImage(ev.Records[0].Change.OldImage)
			shard1["PK"] = events.NewStringAttribute(bucketPK("H", "api", 1))
			f.put(shard1)
		},
		calls: "UpdateItem, PutItem, PutItem",
		check: func(f *fixture, res Result) {
			assert.EqualValues(t, 2, res.ShardItemsCreated, "result = %+v", res)
			assert.EqualValues(t, 4, f.n(f.get(bucketPK("H", "api", 1), "#STATE"), "shard_count"), "shard 1 shard_count")
			for _, k := range []int{2, 3} {
				item := f.get(bucketPK("H", "api", k), "#STATE")
				require.NotNil(t, item, "shard %d not created", k)
				sk := strconv.Itoa(k)
				for attr, want := range map[string]int64{
					"shard_count": 4, "rf": 1772600700000, "ttl": 1780000000,
					"b_rps_tk": 250_000, "b_rps_cp": 1_000_000, "b_rps_ra": 1_000_000, "b_rps_rp": 1000, "b_rps_tc": 0,
					"b_wcu_tk": 1_000_000, "b_wcu_cp": 1_000_000, "b_wcu_ra": 1_000_000, "b_wcu_rp": 1000, "b_wcu_tc": 0,
				} {
					assert.Equal(t, want, f.n(item, attr), "shard %d %s", k, attr)
				}
				for attr, want := range map[string]string{
					"entity_id": "H", "resource": "api", "parent_id": "P",
					"GSI2PK": fixtureNS + "/RESOURCE#api", "GSI2SK": "BUCKET#H#" + sk,
					"GSI3PK": fixtureNS + "/ENTITY#H", "GSI3SK": "BUCKET#api#" + sk,
					"GSI4PK": fixtureNS, "GSI4SK": "BUCKET#H#api#" + sk,
				} {
					assert.Equal(t, want, f.s(item, attr), "shard %d %s", k, attr)
				}
				c, ok := item["cascade"].(*types.AttributeValueMemberBOOL)
				require.True(t, ok, "shard %d cascade = %#v", k, item["cascade"])
				assert.True(t, c.Value, "shard %d cascade = %#v", k, item["cascade"])
			}
		},
	}, {
		// 850 writes since rf a minute ago would have refilled wcu: no
		// doubling (the original doubles below 20 % whatever the time).
		file:  "proactive_shard.json",
		now:   fixtureNow,
		setup: putLastImages,
		calls: "TransactWriteItems",
		check: func(f *fixture, res Result) {
			assert.EqualValues(t, 0, res.ShardsDoubled, "result = %+v", res)
		},
	}, {
		// The same 850 writes within 30 ms of rf: the partition took more
		// than 1000 writes/s (wcu at 18 %). Shard 0 doubles, refills and
		// restarts wcu.
		file:  "proactive_shard.json",
		now:   time.UnixMilli(1772600700000 + 30).UTC(),
		setup: putLastImages,
		calls: "TransactWriteItems, UpdateItem",
		check: func(f *fixture, res Result) {
			item := f.get(bucketPK("H", "api", 0), "#STATE")
			for attr, want := range map[string]int64{
				"shard_count": 2, "b_wcu_tk": 1_000_000, "rf": 1772600700000 + 30,
				"b_rps_tk": 150_000 + 30_000, // 30 ms at 1,000,000/s
			} {
				assert.Equal(t, want, f.n(item, attr), attr)
			}
			assert.EqualValues(t, 1, res.ShardsDoubled, "result = %+v", res)
			assert.EqualValues(t, 0, res.RefillsWritten, "result = %+v", res)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.file+"@"+tt.now.Format("15:04:05.000"), func(t *testing.T) {
			f := newFixture(t, tt.now)
			ev := loadEvent(t, tt.file)
			if tt.setup != nil {
				tt.setup(f, ev)
			}
			f.rec.Reset()
			res := f.proc.Process(f.ctx, ev.Records, "req-1")
			require.Empty(t, res.Failures, "failures %v, errors %v", res.Failures, res.Errors)
			require.Empty(t, res.Errors, "failures %v, errors %v", res.Failures, res.Errors)
			assert.Equal(t, tt.calls, calls(f.rec), "calls")
			tt.check(f, res)
		})
	}
}

// putLastImages writes the last new image of every record's item to the
// table: the table as the stream shows it.
func putLastImages(f *fixture, ev events.DynamoDBEvent) {
	f.t.Helper()
	for _, r := range ev.Records {
		if r.Change.NewImage != nil {
			f.put(r.Change.NewImage)
		}
	}
}

func cloneImage(img map[string]events.DynamoDBAttributeValue) map[string]events.DynamoDBAttributeValue {
	out := make(map[string]events.DynamoDBAttributeValue, len(img))
	for k, v := range img {
		out[k] = v
	}
	return out
}

// TestProcessorMalformed: a record that cannot be decoded, between two
// good ones, is reported with every record after it as BatchItemFailures
// (their sequence numbers), without a panic; only the record before it is
// counted, and redelivering the failed part alone does not count the first
// record twice.
func TestProcessorMalformed(t *testing.T) {
	for _, file := range []string{
		"malformed_key.json", "malformed_event_name.json", "malformed_type.json",
		"malformed_no_old_image.json", "malformed_bucket_pk.json", "malformed_no_sk.json",
	} {
		t.Run(file, func(t *testing.T) {
			f := newFixture(t, fixtureNow)
			ev := loadEvent(t, file)
			resp, err := f.proc.Handle(f.ctx, ev)
			require.NoError(t, err)
			var got []string
			for _, x := range resp.BatchItemFailures {
				got = append(got, x.ItemIdentifier)
			}
			want := []string{ev.Records[1].Change.SequenceNumber, ev.Records[2].Change.SequenceNumber}
			require.Len(t, got, 2, "BatchItemFailures = %v, want %v", got, want)
			require.Equal(t, want[0], got[0], "BatchItemFailures = %v, want %v", got, want)
			require.Equal(t, want[1], got[1], "BatchItemFailures = %v, want %v", got, want)
			// Only the first record counted: +2 rpm, -100 tpm.
			const hour = "2026-03-04T05:00:00Z"
			f.checkSnapshot("C", "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 2, "tpm": -100}, 2)

			// The stream redelivers from the poison record: still refused,
			// nothing counted.
			res := f.proc.Process(f.ctx, ev.Records[1:], "again")
			require.Len(t, res.Failures, 2, "failures = %v", res.Failures)
			require.ErrorIs(t, res.Failures[0].Err, ErrMalformedRecord, "failures = %v", res.Failures)
			require.ErrorIs(t, res.Failures[1].Err, ErrNotApplied, "failures = %v", res.Failures)
			require.Equal(t, ev.Records[1].EventID, res.Failures[0].EventID, "first failure = %+v", res.Failures[0])
			f.checkSnapshot("C", "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 2, "tpm": -100}, 2)
			// Past the poison record (the on-failure destination took it),
			// the last record counts once: +4 rpm.
			require.Empty(t, f.proc.Process(f.ctx, ev.Records[2:], "last").Failures, "failures")
			f.checkSnapshot("C", "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 6, "tpm": -100}, 3)
		})
	}
}
