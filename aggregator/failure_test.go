package aggregator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

// insertRecord is the INSERT of a bucket item of entity that consumed
// rpm tokens, at the fixtures' event time.
func insertRecord(entity string, seq int, rpm int64) events.DynamoDBEventRecord {
	n := func(v int64) events.DynamoDBAttributeValue { return events.NewNumberAttribute(fmt.Sprint(v)) }
	s := events.NewStringAttribute
	pk := bucketPK(entity, "gpt", 0)
	img := map[string]events.DynamoDBAttributeValue{
		"PK": s(pk), "SK": s("#STATE"), "entity_id": s(entity), "resource": s("gpt"),
		"rf": n(fixtureEventTime.UnixMilli()), "shard_count": n(1),
		"b_rpm_tk": n(100_000 - rpm*1000), "b_rpm_cp": n(100_000), "b_rpm_ra": n(100_000), "b_rpm_rp": n(60_000), "b_rpm_tc": n(rpm * 1000),
	}
	return events.DynamoDBEventRecord{
		EventID: fmt.Sprintf("ev-%s", entity), EventName: "INSERT",
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: fixtureEventTime},
			Keys:                        map[string]events.DynamoDBAttributeValue{"PK": s(pk), "SK": s("#STATE")},
			NewImage:                    img,
			SequenceNumber:              fmt.Sprintf("%021d", seq),
		},
	}
}

// TestProcessorSnapshotFailureCutsBatch: 120 records touch 240 snapshot
// items, written in chunks of 100 items (50 whole records). When the second
// chunk fails, its records and every later one are reported, nothing of
// them is counted, and redelivering them counts each record once.
func TestProcessorSnapshotFailureCutsBatch(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	outage := errors.New("injected outage")
	fault := ddblocal.WithFault(func(_ context.Context, op string, in any) error {
		tw, ok := in.(*dynamodb.TransactWriteItemsInput)
		if !ok || !down.Load() {
			return nil
		}
		pk := tw.TransactItems[0].Update.Key["PK"].(*types.AttributeValueMemberS).Value
		if strings.HasSuffix(pk, "/ENTITY#e050") {
			return outage
		}
		return nil
	})
	f := newFixture(t, fixtureNow)
	proc, err := NewProcessor(ddblocal.Client(t, f.rec.Option(), fault), f.table, func(o *Options) { o.Now = func() time.Time { return fixtureNow } })
	require.NoError(t, err)
	var recs []events.DynamoDBEventRecord
	for i := range 120 {
		recs = append(recs, insertRecord(fmt.Sprintf("e%03d", i), i+1, 1))
	}
	res := proc.Process(f.ctx, recs, "req")
	require.Len(t, res.Failures, 70, "%d failures, first %+v", len(res.Failures), res.Failures[0])
	require.Equal(t, "ev-e050", res.Failures[0].EventID, "%d failures, first %+v", len(res.Failures), res.Failures[0])
	require.ErrorIs(t, res.Failures[0].Err, outage, "%d failures, first %+v", len(res.Failures), res.Failures[0])
	require.EqualValues(t, 100, res.SnapshotsUpdated, "snapshots = %d, want 100", res.SnapshotsUpdated)
	require.EqualValues(t, 2, f.rec.Count("TransactWriteItems"), "TransactWriteItems")
	const hour = "2026-03-04T05:00:00Z"
	snapshot := func(entity string) map[string]types.AttributeValue {
		return f.get(fixtureNS+"/ENTITY#"+entity, "#USAGE#gpt#"+hour+"#hourly")
	}
	require.NotNil(t, snapshot("e049"), "the cut is not at record 50")
	require.Nil(t, snapshot("e050"), "the cut is not at record 50")
	require.Nil(t, snapshot("e119"), "the cut is not at record 50")

	// The stream redelivers from record 50.
	down.Store(false)
	res = proc.Process(f.ctx, recs[50:], "req-2")
	require.Empty(t, res.Failures, "redelivery: %+v", res)
	require.EqualValues(t, 140, res.SnapshotsUpdated, "redelivery: %+v", res)
	for i := range 120 {
		entity := fmt.Sprintf("e%03d", i)
		f.checkSnapshot(entity, "gpt", hour, store.WindowHourly, map[string]int64{"rpm": 1}, 1)
		f.checkSnapshot(entity, "gpt", "2026-03-04T00:00:00Z", store.WindowDaily, map[string]int64{"rpm": 1}, 1)
	}
}

// TestProcessorSnapshotConflictRetried: a transaction canceled by a
// conflicting write (another aggregator instance on the same snapshot) is
// retried, and counts once.
func TestProcessorSnapshotConflictRetried(t *testing.T) {
	var conflicts atomic.Int32
	conflicts.Store(2)
	fault := ddblocal.WithFault(func(_ context.Context, op string, _ any) error {
		if op != "TransactWriteItems" || conflicts.Add(-1) < 0 {
			return nil
		}
		return &types.TransactionCanceledException{
			Message:             aws.String("injected conflict"),
			CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}, {Code: aws.String("None")}},
		}
	})
	f := newFixture(t, fixtureNow)
	proc, err := NewProcessor(ddblocal.Client(t, f.rec.Option(), fault), f.table, func(o *Options) { o.Now = func() time.Time { return fixtureNow } })
	require.NoError(t, err)
	res := proc.Process(f.ctx, []events.DynamoDBEventRecord{insertRecord("c", 1, 2)}, "req")
	require.Empty(t, res.Failures, "result = %+v", res)
	require.EqualValues(t, 2, res.SnapshotsUpdated, "result = %+v", res)
	require.Equal(t, "TransactWriteItems!, TransactWriteItems!, TransactWriteItems", calls(f.rec), "calls")
	f.checkSnapshot("c", "gpt", "2026-03-04T05:00:00Z", store.WindowHourly, map[string]int64{"rpm": 2}, 1)
}

// TestProcessorCostOneWritePerBatch: 100 records of one bucket item cost one
// TransactWriteItems of its 2 snapshot items (hourly, daily); the original
// sends one UpdateItem per limit delta and window, 200 here. No refill is
// due (the balances cover the batch).
func TestProcessorCostOneWritePerBatch(t *testing.T) {
	f := newFixture(t, fixtureNow)
	var recs []events.DynamoDBEventRecord
	for i := range 100 {
		recs = append(recs, insertRecord("same", i+1, 1))
	}
	res := f.proc.Process(f.ctx, recs, "req")
	require.Empty(t, res.Failures, "result = %+v", res)
	require.EqualValues(t, 2, res.SnapshotsUpdated, "result = %+v", res)
	require.Equal(t, "TransactWriteItems", calls(f.rec), "calls")
	f.checkSnapshot("same", "gpt", "2026-03-04T05:00:00Z", store.WindowHourly, map[string]int64{"rpm": 100}, 100)
}
