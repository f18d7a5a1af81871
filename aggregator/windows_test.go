package aggregator

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// streamTap reads a table's stream directly, so that a test can stamp each
// record with the (fake) instant of the write that made it and hand the
// records to the Lambda handler as one event.
type streamTap struct {
	t       *testing.T
	streams *dynamodbstreams.Client
	arn     string
	lastSeq map[string]string // shard id → last sequence number read
}

func newStreamTap(t *testing.T, table string) *streamTap {
	t.Helper()
	s := &streamTap{t: t, streams: ddblocal.StreamsClient(t), lastSeq: map[string]string{}}
	out, err := s.streams.ListStreams(context.Background(), &dynamodbstreams.ListStreamsInput{TableName: aws.String(table)})
	require.NoError(t, err, "ListStreams")
	require.NotEmpty(t, out.Streams, "table %s has no stream", table)
	s.arn = aws.ToString(out.Streams[len(out.Streams)-1].StreamArn)
	return s
}

// read returns the records written since the last read, as the event
// source mapping delivers them, each with ApproximateCreationDateTime at.
func (s *streamTap) read(at time.Time) []events.DynamoDBEventRecord {
	s.t.Helper()
	ctx := context.Background()
	desc, err := s.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.arn)})
	require.NoError(s.t, err, "DescribeStream")
	var recs []events.DynamoDBEventRecord
	for _, sh := range desc.StreamDescription.Shards {
		id := aws.ToString(sh.ShardId)
		in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.arn), ShardId: aws.String(id),
			ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon}
		if seq := s.lastSeq[id]; seq != "" {
			in.ShardIteratorType, in.SequenceNumber = streamtypes.ShardIteratorTypeAfterSequenceNumber, aws.String(seq)
		}
		it, err := s.streams.GetShardIterator(ctx, in)
		require.NoError(s.t, err, "GetShardIterator")
		for iter := it.ShardIterator; iter != nil; {
			out, err := s.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			require.NoError(s.t, err, "GetRecords")
			for _, r := range out.Records {
				r.Dynamodb.ApproximateCreationDateTime = aws.Time(at)
				recs = append(recs, EventRecord(r, s.arn))
				s.lastSeq[id] = aws.ToString(r.Dynamodb.SequenceNumber)
			}
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	return recs
}

// invokeLambda hands recs to the processor the way the Lambda runtime
// does: the event as JSON through aws-lambda-go's handler adapter (the
// function lambda.Start runs), and the response decoded from JSON. It
// fails the test on reported failures.
func invokeLambda(t *testing.T, proc *Processor, recs []events.DynamoDBEventRecord) {
	t.Helper()
	payload, err := json.Marshal(events.DynamoDBEvent{Records: recs})
	require.NoError(t, err)
	out, err := lambda.NewHandler(proc.Handle).Invoke(context.Background(), payload)
	require.NoError(t, err, "Invoke")
	var resp events.DynamoDBEventResponse
	require.NoError(t, json.Unmarshal(out, &resp), "response %s", out)
	require.Empty(t, resp.BatchItemFailures, "BatchItemFailures")
}

// windowModel is the exact usage of an entity per window: window type and
// start → counters and total_events.
type windowModel map[string]map[time.Time]windowUsage

type windowUsage struct {
	Counters map[string]int64
	Events   int64
}

// modelStart is the start of the window of type w containing t, computed
// independently of the code under test.
func modelStart(w string, t time.Time) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	switch w {
	case store.WindowHourly:
		return time.Date(y, m, d, t.Hour(), 0, 0, 0, time.UTC)
	case store.WindowDaily:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	case store.WindowMonthly:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	}
	panic("unknown window " + w)
}

// add counts a request consuming c at t (one limit delta per limit) in
// every window of windows.
func (m windowModel) add(windows []string, t time.Time, c limiter.Consume) {
	for _, w := range windows {
		if m[w] == nil {
			m[w] = map[time.Time]windowUsage{}
		}
		start := modelStart(w, t)
		u, ok := m[w][start]
		if !ok {
			u.Counters = map[string]int64{}
		}
		for name, n := range c {
			u.Counters[name] += n
			u.Events++
		}
		m[w][start] = u
	}
}

// snapshotModel reads every usage snapshot of entity through the
// repository's query API, in the model's shape. Two snapshots of one
// window type and start fail the test.
func snapshotModel(t *testing.T, rl *limiter.RateLimiter, entity string) windowModel {
	t.Helper()
	got := windowModel{}
	q := limiter.UsageQuery{EntityID: entity, Limit: 2} // several pages
	n := 0
	for s, err := range rl.Admin().UsageSnapshots(context.Background(), q) {
		require.NoError(t, err)
		n++
		require.Less(t, n, 200, "no end of snapshots")
		if got[s.WindowType] == nil {
			got[s.WindowType] = map[time.Time]windowUsage{}
		}
		require.NotContains(t, got[s.WindowType], s.WindowStart, "two %s snapshots starting %v", s.WindowType, s.WindowStart)
		got[s.WindowType][s.WindowStart.UTC()] = windowUsage{Counters: s.Counters, Events: s.TotalEvents}
	}
	return got
}

// runWindowed runs one acquire and commit of c on entity/gpt at each
// instant (ascending) on the fake clock, alternating the read-then-write
// and the speculative path, stamps each write's stream records with its
// instant, hands them to invoke as one batch (nil: to the Lambda handler
// through invokeLambda), and returns the exact model of the usage.
func runWindowed(t *testing.T, e *env, windows []string, entity string, instants []time.Time, c limiter.Consume,
	invoke func(*testing.T, []events.DynamoDBEventRecord)) windowModel {
	t.Helper()
	tap := newStreamTap(t, e.proc.Table())
	tap.read(time.Time{}) // nothing of the test written yet but the table's own items
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1_000_000))
	model := windowModel{}
	var batch []events.DynamoDBEventRecord
	for i, at := range instants {
		e.clock.set(at)
		rl := e.limiter(i%2 == 1)
		mustCommit(t, mustAcquire(t, rl, entity, "gpt", c, lim))
		recs := tap.read(at)
		require.NotEmpty(t, recs, "stream records of the request at %v", at)
		batch = append(batch, recs...)
		model.add(windows, at, c)
	}
	if invoke == nil {
		invoke = func(t *testing.T, recs []events.DynamoDBEventRecord) { invokeLambda(t, e.proc, recs) }
	}
	invoke(t, batch)
	return model
}

var allWindows = []string{store.WindowHourly, store.WindowDaily, store.WindowMonthly}

// TestLambdaMidnightWindowsApart: four requests at 00:30 UTC on the 1st of
// a month, written by the limiter in the table's shared layout and handed
// to the Lambda handler, are reported once in each of the hourly, daily
// and monthly windows, each its own snapshot item; no item of the shared
// layout (one sort key per window start) is written. Before each window
// type had its own item, the one item held 12 requests, named hourly.
func TestLambdaMidnightWindowsApart(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Windows = allWindows })
	at := time.Date(2026, 12, 1, 0, 30, 0, 0, time.UTC)
	instants := []time.Time{at, at.Add(time.Second), at.Add(2 * time.Second), at.Add(3 * time.Second)}
	model := runWindowed(t, e, allWindows, "k", instants, limiter.Consume{"rpm": 1, "tpm": 100}, nil)

	got := snapshotModel(t, e.limiter(false), "k")
	require.Equal(t, model, got, "snapshots by window type and start")
	midnight := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, w := range allWindows {
		u, ok := got[w][midnight]
		require.True(t, ok, "no %s snapshot at %v: %v", w, midnight, got)
		require.Equal(t, map[string]int64{"rpm": 4, "tpm": 400}, u.Counters, "%s window", w)
		require.EqualValues(t, 8, u.Events, "%s window total_events", w)
		key := ddbschema.FormatISOSeconds(midnight)
		require.NotNil(t, e.item(ddbschema.PKEntity(e.repo.NamespaceID(), "k"), ddbschema.SKUsage("gpt", key, w)), "%s item", w)
	}
	require.Nil(t, e.item(ddbschema.PKEntity(e.repo.NamespaceID(), "k"), ddbschema.SKUsageShared("gpt", ddbschema.FormatISOSeconds(midnight))),
		"an item of the shared layout was written")

	// The summary of one window type is the consumption once.
	for _, w := range allWindows {
		sum, err := e.limiter(false).Admin().UsageSummary(e.ctx, limiter.UsageQuery{EntityID: "k", Resource: "gpt", WindowType: w})
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"rpm": 4, "tpm": 400}, sum.Total, "%s summary", w)
		require.Equal(t, 1, sum.SnapshotCount, "%s summary", w)
	}
}

// TestLambdaWindowBoundaries: requests a millisecond either side of
// midnight, at the turn of a month, of a year and around a leap day land
// in exactly the windows an independent model puts them in, each window
// type and start one snapshot.
func TestLambdaWindowBoundaries(t *testing.T) {
	for name, instants := range map[string][]time.Time{
		"midnight": {
			time.Date(2026, 12, 2, 23, 59, 59, 999_000_000, time.UTC),
			time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC),
			time.Date(2026, 12, 3, 0, 59, 59, 999_000_000, time.UTC),
			time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC),
		},
		"month and year": {
			time.Date(2026, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
			time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(2027, 1, 31, 23, 59, 59, 999_000_000, time.UTC),
			time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC),
		},
		"leap day": {
			time.Date(2028, 2, 28, 23, 59, 59, 999_000_000, time.UTC),
			time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC),
			time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC),
			time.Date(2028, 2, 29, 23, 59, 59, 999_000_000, time.UTC),
			time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC),
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.Windows = allWindows })
			model := runWindowed(t, e, allWindows, "k", instants, limiter.Consume{"rpm": 1, "tpm": 7}, nil)
			require.Equal(t, model, snapshotModel(t, e.limiter(false), "k"), "snapshots by window type and start")
		})
	}
}

// TestProcessorWindowNamedTwice: a window type configured twice
// (SNAPSHOT_WINDOWS=hourly,daily,hourly) is one snapshot item, counted
// once.
func TestProcessorWindowNamedTwice(t *testing.T) {
	f := newFixture(t, fixtureNow)
	proc, err := NewProcessor(ddblocal.Client(t), f.table, func(o *Options) {
		o.Now = func() time.Time { return fixtureNow }
		o.Windows = []string{store.WindowHourly, store.WindowDaily, store.WindowHourly}
	})
	require.NoError(t, err)
	resp, err := proc.Handle(f.ctx, loadEvent(t, "insert_bucket.json"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	f.checkSnapshot("C", "gpt", "2026-03-04T05:00:00Z", store.WindowHourly, map[string]int64{"rpm": 3, "tpm": 500}, 2)
	f.checkSnapshot("C", "gpt", "2026-03-04T00:00:00Z", store.WindowDaily, map[string]int64{"rpm": 3, "tpm": 500}, 2)
}

// pythonSnapshotUpdate is the UpdateItem the Python library's aggregator
// sends for one limit delta and window: the item keyed by the window start
// only, the window type set by the first writer.
func pythonSnapshotUpdate(table, ns, entity, resource, window, start, limit string, delta int64, ttl int64) *dynamodb.UpdateItemInput {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(table),
		Key:       map[string]types.AttributeValue{"PK": s(ns + "/ENTITY#" + entity), "SK": s("#USAGE#" + resource + "#" + start)},
		UpdateExpression: aws.String("SET entity_id = :entity_id, #resource = if_not_exists(#resource, :resource), " +
			"#window = if_not_exists(#window, :window), #window_start = if_not_exists(#window_start, :window_start), " +
			"GSI2PK = :gsi2pk, GSI2SK = :gsi2sk, GSI4PK = if_not_exists(GSI4PK, :gsi4pk), GSI4SK = if_not_exists(GSI4SK, :gsi4sk), " +
			"#ttl = if_not_exists(#ttl, :ttl) ADD #limit_name :delta, #total_events :one"),
		ExpressionAttributeNames: map[string]string{"#resource": "resource", "#window": "window", "#window_start": "window_start",
			"#limit_name": limit, "#total_events": "total_events", "#ttl": "ttl"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":entity_id": s(entity), ":resource": s(resource), ":window": s(window), ":window_start": s(start),
			":gsi2pk": s(ns + "/RESOURCE#" + resource), ":gsi2sk": s("USAGE#" + start + "#" + entity),
			":gsi4pk": s(ns), ":gsi4sk": s(ns + "/ENTITY#" + entity), ":ttl": n(ttl), ":delta": n(delta), ":one": n(1),
		},
	}
}

// TestProcessorLeavesSharedItems: in the hour an aggregator of the shared
// layout (the Python library's) handed over, its item keeps what it
// counted and the processor counts into the window types' own items; the
// repository reads both.
func TestProcessorLeavesSharedItems(t *testing.T) {
	f := newFixture(t, fixtureNow)
	const hour = "2026-03-04T05:00:00Z"
	ttl := fixtureNow.Add(90 * 24 * time.Hour).Unix()
	for _, w := range []string{store.WindowHourly, store.WindowDaily} {
		_, err := f.client.UpdateItem(f.ctx, pythonSnapshotUpdate(f.table, fixtureNS, "C", "gpt", w, hour, "rpm", 10, ttl))
		require.NoError(t, err)
	}
	shared := f.get(fixtureNS+"/ENTITY#C", "#USAGE#gpt#"+hour)
	require.NotNil(t, shared)
	resp, err := f.proc.Handle(f.ctx, loadEvent(t, "modify_bucket.json"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Equal(t, shared, f.get(fixtureNS+"/ENTITY#C", "#USAGE#gpt#"+hour), "the shared item changed")
	f.checkSnapshot("C", "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 2, "tpm": -100}, 2)
	f.checkSnapshot("C", "gpt", "2026-03-04T00:00:00Z", store.WindowDaily, map[string]int64{"rpm": 2, "tpm": -100}, 2)

	got, ok, err := ddbschema.UsageSnapshotFromItem(shared)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.WindowHourly, got.WindowType, "the shared item reads as its first writer's window")
	require.Equal(t, map[string]int64{"rpm": 20}, got.Counters, "the shared item's counters as stored")
}
