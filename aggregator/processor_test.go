package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
	if _, err := limiter.OpenDynamoDB(f.ctx, f.client, func(o *limiter.DynamoDBOptions) {
		o.Table = f.table
		o.CreateTable = true
	}); err != nil {
		t.Fatalf("OpenDynamoDB: %v", err)
	}
	t.Cleanup(func() {
		_, _ = f.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(f.table)})
	})
	var err error
	f.proc, err = NewProcessor(ddblocal.Client(t, f.rec.Option()), f.table, func(o *Options) { o.Now = func() time.Time { return now } })
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// load reads testdata/name.
func loadEvent(t *testing.T, name string) events.DynamoDBEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

// put writes a stream image to the table as an item.
func (f *fixture) put(img map[string]events.DynamoDBAttributeValue) {
	f.t.Helper()
	item, err := convertImage(img)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.client.PutItem(f.ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item}); err != nil {
		f.t.Fatal(err)
	}
}

// get reads an item; nil when missing.
func (f *fixture) get(pk, sk string) map[string]types.AttributeValue {
	f.t.Helper()
	out, err := f.client.GetItem(f.ctx, &dynamodb.GetItemInput{
		TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: sk}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out.Item
}

// n reads a number attribute (failing when it is missing).
func (f *fixture) n(item map[string]types.AttributeValue, attr string) int64 {
	f.t.Helper()
	v, ok := item[attr].(*types.AttributeValueMemberN)
	if !ok {
		f.t.Fatalf("attribute %s = %#v, want a number", attr, item[attr])
	}
	x, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		f.t.Fatal(err)
	}
	return x
}

func (f *fixture) s(item map[string]types.AttributeValue, attr string) string {
	f.t.Helper()
	v, ok := item[attr].(*types.AttributeValueMemberS)
	if !ok {
		f.t.Fatalf("attribute %s = %#v, want a string", attr, item[attr])
	}
	return v.Value
}

// bucketPK is the PK of a fixture bucket item.
func bucketPK(entity, resource string, shard int) string {
	return fixtureNS + "/BUCKET#" + entity + "#" + resource + "#" + strconv.Itoa(shard)
}

// checkSnapshot checks one snapshot item's counters and total_events.
func (f *fixture) checkSnapshot(entity, resource, windowStart, window string, counters map[string]int64, events int64) {
	f.t.Helper()
	item := f.get(fixtureNS+"/ENTITY#"+entity, "#USAGE#"+resource+"#"+windowStart)
	if item == nil {
		f.t.Fatalf("no snapshot %s/%s %s", entity, resource, windowStart)
	}
	for name, want := range counters {
		if got := f.n(item, name); got != want {
			f.t.Errorf("snapshot %s %s = %d, want %d", windowStart, name, got, want)
		}
	}
	if got := f.n(item, "total_events"); got != events {
		f.t.Errorf("snapshot %s total_events = %d, want %d", windowStart, got, events)
	}
	if _, ok := item["wcu"]; ok {
		f.t.Errorf("snapshot %s counts the hidden wcu limit", windowStart)
	}
	for attr, want := range map[string]string{
		"entity_id": entity, "resource": resource, "window": window, "window_start": windowStart,
		"GSI2PK": fixtureNS + "/RESOURCE#" + resource, "GSI2SK": "USAGE#" + windowStart + "#" + entity,
		"GSI4PK": fixtureNS, "GSI4SK": fixtureNS + "/ENTITY#" + entity,
	} {
		if got := f.s(item, attr); got != want {
			f.t.Errorf("snapshot %s %s = %q, want %q", windowStart, attr, got, want)
		}
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
			if res.SnapshotsUpdated != 2 || res.RefillsWritten != 0 {
				t.Errorf("result = %+v", res)
			}
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
		// TTL deletions of an audit event (archival off) and of a bucket:
		// nothing to write, nothing failed.
		file:  "remove_ttl.json",
		now:   fixtureNow,
		calls: "",
		check: func(f *fixture, res Result) {
			if res.Processed != 2 || res.SnapshotsUpdated != 0 || res.EventsArchived != 0 {
				t.Errorf("result = %+v", res)
			}
		},
	}, {
		// The original's refill example: 30 s at 100,000,000 per 60 s
		// refills 50,000,000, which does not cover the batch's
		// 60,000,000: written, rf moved.
		// The record's event time, 00:00:30, puts the hourly and the daily
		// window in one snapshot item (the original's sort key): one
		// UpdateItem adds both, and the item says hourly.
		file:  "refill_written.json",
		now:   refillNow,
		setup: putLastImages,
		calls: "UpdateItem, UpdateItem",
		check: func(f *fixture, res Result) {
			f.checkSnapshot("L", "api", "2026-01-01T00:00:00Z", store.WindowHourly, map[string]int64{"tpm": 2 * 60_000}, 2)
			item := f.get(bucketPK("L", "api", 0), "#STATE")
			if got := f.n(item, "b_tpm_tk"); got != 50_000_000 {
				t.Errorf("tk = %d, want 50000000", got)
			}
			if got := f.n(item, "rf"); got != refillNow.UnixMilli() {
				t.Errorf("rf = %d, want %d", got, refillNow.UnixMilli())
			}
			if got := f.n(item, "b_tpm_tc"); got != 60_000_000 {
				t.Errorf("tc = %d, want untouched 60000000", got)
			}
			if res.RefillsWritten != 1 {
				t.Errorf("result = %+v", res)
			}
		},
	}, {
		// The same refill with 40,000,000 consumed: the refilled 50,000,000
		// covers it, so nothing is written.
		file:  "refill_covered.json",
		now:   refillNow,
		setup: putLastImages,
		calls: "UpdateItem",
		check: func(f *fixture, res Result) {
			item := f.get(bucketPK("L", "api", 0), "#STATE")
			if tk, rf := f.n(item, "b_tpm_tk"), f.n(item, "rf"); tk != 0 || rf != 1767225600000 {
				t.Errorf("tk, rf = %d, %d; want the item untouched", tk, rf)
			}
			if res.RefillsWritten != 0 {
				t.Errorf("result = %+v", res)
			}
		},
	}, {
		// The same refill on two shards: each owns half the capacity and
		// rate, so shard 0 gets 25,000,000.
		file:  "refill_two_shards.json",
		now:   refillNow,
		setup: putLastImages,
		calls: "UpdateItem, UpdateItem",
		check: func(f *fixture, res Result) {
			if got := f.n(f.get(bucketPK("L", "api", 0), "#STATE"), "b_tpm_tk"); got != 25_000_000 {
				t.Errorf("tk = %d, want 25000000", got)
			}
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
			if res.ShardItemsCreated != 2 {
				t.Errorf("result = %+v", res)
			}
			if got := f.n(f.get(bucketPK("H", "api", 1), "#STATE"), "shard_count"); got != 4 {
				t.Errorf("shard 1 shard_count = %d, want 4", got)
			}
			for _, k := range []int{2, 3} {
				item := f.get(bucketPK("H", "api", k), "#STATE")
				if item == nil {
					t.Fatalf("shard %d not created", k)
				}
				sk := strconv.Itoa(k)
				for attr, want := range map[string]int64{
					"shard_count": 4, "rf": 1772600700000, "ttl": 1780000000,
					"b_rps_tk": 250_000, "b_rps_cp": 1_000_000, "b_rps_ra": 1_000_000, "b_rps_rp": 1000, "b_rps_tc": 0,
					"b_wcu_tk": 1_000_000, "b_wcu_cp": 1_000_000, "b_wcu_ra": 1_000_000, "b_wcu_rp": 1000, "b_wcu_tc": 0,
				} {
					if got := f.n(item, attr); got != want {
						t.Errorf("shard %d %s = %d, want %d", k, attr, got, want)
					}
				}
				for attr, want := range map[string]string{
					"entity_id": "H", "resource": "api", "parent_id": "P",
					"GSI2PK": fixtureNS + "/RESOURCE#api", "GSI2SK": "BUCKET#H#" + sk,
					"GSI3PK": fixtureNS + "/ENTITY#H", "GSI3SK": "BUCKET#api#" + sk,
					"GSI4PK": fixtureNS, "GSI4SK": "BUCKET#H#api#" + sk,
				} {
					if got := f.s(item, attr); got != want {
						t.Errorf("shard %d %s = %q, want %q", k, attr, got, want)
					}
				}
				if c, ok := item["cascade"].(*types.AttributeValueMemberBOOL); !ok || !c.Value {
					t.Errorf("shard %d cascade = %#v", k, item["cascade"])
				}
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
			if res.ShardsDoubled != 0 {
				t.Errorf("result = %+v", res)
			}
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
				if got := f.n(item, attr); got != want {
					t.Errorf("%s = %d, want %d", attr, got, want)
				}
			}
			if res.ShardsDoubled != 1 || res.RefillsWritten != 0 {
				t.Errorf("result = %+v", res)
			}
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
			if len(res.Failures) != 0 || len(res.Errors) != 0 {
				t.Fatalf("failures %v, errors %v", res.Failures, res.Errors)
			}
			if got := calls(f.rec); got != tt.calls {
				t.Errorf("calls = %q, want %q", got, tt.calls)
			}
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
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range resp.BatchItemFailures {
				got = append(got, x.ItemIdentifier)
			}
			want := []string{ev.Records[1].Change.SequenceNumber, ev.Records[2].Change.SequenceNumber}
			if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
				t.Fatalf("BatchItemFailures = %v, want %v", got, want)
			}
			// Only the first record counted: +2 rpm, -100 tpm.
			const hour = "2026-03-04T05:00:00Z"
			f.checkSnapshot("C", "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 2, "tpm": -100}, 2)

			// The stream redelivers from the poison record: still refused,
			// nothing counted.
			res := f.proc.Process(f.ctx, ev.Records[1:], "again")
			if len(res.Failures) != 2 || !errors.Is(res.Failures[0].Err, ErrMalformedRecord) || !errors.Is(res.Failures[1].Err, ErrNotApplied) {
				t.Fatalf("failures = %v", res.Failures)
			}
			if res.Failures[0].EventID != ev.Records[1].EventID {
				t.Fatalf("first failure = %+v", res.Failures[0])
			}
			f.checkSnapshot("C", "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 2, "tpm": -100}, 2)
			// Past the poison record (the on-failure destination took it),
			// the last record counts once: +4 rpm.
			if res := f.proc.Process(f.ctx, ev.Records[2:], "last"); len(res.Failures) != 0 {
				t.Fatalf("failures = %v", res.Failures)
			}
			f.checkSnapshot("C", "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 6, "tpm": -100}, 3)
		})
	}
}
