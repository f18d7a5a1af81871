package ddblocal

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// captureStderr runs f with os.Stderr redirected and returns what was
// written. Tests that use it must not run in parallel.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	saved := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = saved }()
	f()
	os.Stderr = saved
	w.Close()
	return <-done
}

// TestRecorderConditionalCheckFailed provokes a ConditionalCheckFailed,
// checks that the recorder saw it with its code, and that the SDK printed
// nothing (no checksum or retry warnings) while handling the error: not on
// stderr, and not to a logger attached to the client either.
func TestRecorderConditionalCheckFailed(t *testing.T) { // not parallel: swaps os.Stderr
	var rec Recorder
	var sdkLog bytes.Buffer
	client := Client(t, rec.Option(), func(o *dynamodb.Options) {
		o.Logger = logging.NewStandardLogger(&sdkLog)
	})
	table := TableName(t)
	createTable(t, client, table, false)
	rec.Reset()

	put := &dynamodb.PutItemInput{
		TableName:           aws.String(table),
		Item:                item("a", 1),
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}
	var err error
	stderr := captureStderr(t, func() {
		if _, err = client.PutItem(t.Context(), put); err != nil {
			return
		}
		_, err = client.PutItem(t.Context(), put)
	})
	var ccf *types.ConditionalCheckFailedException
	require.ErrorAs(t, err, &ccf, "second PutItem error, want ConditionalCheckFailedException")
	assert.Empty(t, stderr, "stderr during the calls, want nothing")
	assert.EqualValues(t, 0, sdkLog.Len(), "SDK logged %q, want nothing", sdkLog.String())

	calls := rec.Calls()
	require.Len(t, calls, 2, "recorded %d calls (%s), want 2", len(calls), rec.Summary())
	c := calls[0]
	assert.Equal(t, "PutItem", c.Op, "first call = %+v, want a successful PutItem in 1 attempt", c)
	require.False(t, c.Failed(), "first call = %+v, want a successful PutItem in 1 attempt", c)
	assert.Empty(t, c.ErrorCode, "first call = %+v, want a successful PutItem in 1 attempt", c)
	assert.EqualValues(t, 1, c.Attempts, "first call = %+v, want a successful PutItem in 1 attempt", c)
	c = calls[1]
	assert.Equal(t, "PutItem", c.Op, "second call = %+v, want a PutItem failed with ConditionalCheckFailedException in 1 attempt", c)
	require.True(t, c.Failed(), "second call = %+v, want a PutItem failed with ConditionalCheckFailedException in 1 attempt", c)
	assert.Equal(t, "ConditionalCheckFailedException", c.ErrorCode, "second call = %+v, want a PutItem failed with ConditionalCheckFailedException in 1 attempt", c)
	assert.EqualValues(t, 1, c.Attempts, "second call = %+v, want a PutItem failed with ConditionalCheckFailedException in 1 attempt", c)
	got, want := rec.Summary(), "PutItem×1, PutItem×1(failed ConditionalCheckFailed)"
	assert.Equal(t, want, got, "Summary = %q, want %q", got, want)
	assert.EqualValues(t, 2, rec.Count("PutItem"), "Count(PutItem)")
}

func TestRecorderBatchTransactCapacity(t *testing.T) {
	t.Parallel()
	var rec Recorder
	client := Client(t, rec.Option())
	table := TableName(t)
	createTable(t, client, table, false)
	rec.Reset()
	ctx := t.Context()

	var writes []types.WriteRequest
	for _, pk := range []string{"a", "b", "c"} {
		writes = append(writes, types.WriteRequest{PutRequest: &types.PutRequest{Item: item(pk, 1)}})
	}
	_, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
		RequestItems:           map[string][]types.WriteRequest{table: writes},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	require.NoError(t, err, "BatchWriteItem")
	_, err = client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
		RequestItems:           map[string]types.KeysAndAttributes{table: {Keys: []map[string]types.AttributeValue{key("a"), key("b")}}},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	require.NoError(t, err, "BatchGetItem")
	_, err = client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a")})
	require.NoError(t, err, "GetItem")
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: aws.String(table), Key: key("a"),
			UpdateExpression:          aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		}},
		{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(table), Key: key("zzz"),
			ConditionExpression: aws.String("attribute_exists(pk)"),
		}},
	}})
	var tce *types.TransactionCanceledException
	require.ErrorAs(t, err, &tce, "TransactWriteItems error, want TransactionCanceledException")

	want := "BatchWriteItem×1[3 items], BatchGetItem×1[2 keys], GetItem×1, " +
		"TransactWriteItems×1[2 items](failed TransactionCanceled: None,ConditionalCheckFailed)"
	assert.Equal(t, want, rec.Summary(), "Summary")
	calls := rec.Calls()
	require.Len(t, calls, 4, "recorded %d calls, want 4", len(calls))
	// On-demand capacity: 1 WCU per item up to 1 KB, 0.5 RCU per eventually
	// consistent read up to 4 KB.
	assert.Equal(t, 3.0, calls[0].Capacity.Units, "BatchWriteItem consumed units")
	assert.Equal(t, 1.0, calls[1].Capacity.Units, "BatchGetItem consumed units")
	assert.Equal(t, (Capacity{}), calls[2].Capacity, "GetItem without ReturnConsumedCapacity recorded")
	assert.Equal(t, "TransactionCanceledException", calls[3].ErrorCode, "TransactWriteItems ErrorCode")
	assert.EqualValues(t, 4, rec.Consumed("").Units, "Consumed(\"\")")
	rec.Reset()
	assert.Equal(t, "no calls", rec.Summary(), "Summary after Reset")
}

func TestRecorderConcurrent(t *testing.T) {
	t.Parallel()
	var rec Recorder
	client := Client(t, rec.Option())
	table := TableName(t)
	createTable(t, client, table, false)
	rec.Reset()

	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("k", i)})
			require.NoError(t, err, "PutItem")
			_ = rec.Summary() // reads race with writes
		})
	}
	wg.Wait()
	assert.Equal(t, n, rec.Count("PutItem"), "Count(PutItem)")
	got, want := rec.Summary(), "PutItem×16"
	assert.Equal(t, want, got, "Summary = %q, want %q", got, want)
}

func TestFaultThrottle(t *testing.T) {
	t.Parallel()
	var rec Recorder
	client := Client(t, rec.Option())
	table := TableName(t)
	createTable(t, client, table, false)
	get := &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a")}

	t.Run("retried", func(t *testing.T) {
		rec.Reset()
		_, err := client.GetItem(t.Context(), get, WithFault(Throttle("GetItem", 1)))
		require.NoError(t, err, "GetItem with one throttled attempt")
		calls := rec.Calls()
		require.Len(t, calls, 1, "calls = %+v, want one successful GetItem in 2 attempts", calls)
		assert.EqualValues(t, 2, calls[0].Attempts, "calls = %+v, want one successful GetItem in 2 attempts", calls)
		assert.False(t, calls[0].Failed(), "calls = %+v, want one successful GetItem in 2 attempts", calls)
	})
	t.Run("exhausted", func(t *testing.T) {
		rec.Reset()
		_, err := client.GetItem(t.Context(), get, WithFault(Throttle("", 100)))
		var pte *types.ProvisionedThroughputExceededException
		require.ErrorAs(t, err, &pte, "GetItem error, want ProvisionedThroughputExceededException")
		calls := rec.Calls()
		require.Len(t, calls, 1, "calls = %+v, want one GetItem failed after %d attempts", calls, RetryMaxAttempts)
		assert.Equal(t, RetryMaxAttempts, calls[0].Attempts, "calls = %+v, want one GetItem failed after %d attempts", calls, RetryMaxAttempts)
		assert.Equal(t, "ProvisionedThroughputExceededException", calls[0].ErrorCode, "calls = %+v, want one GetItem failed after %d attempts", calls, RetryMaxAttempts)
		got, want := rec.Summary(), "GetItem×1(failed ProvisionedThroughputExceeded)"
		assert.Equal(t, want, got, "Summary = %q, want %q", got, want)
	})
	t.Run("two faults and the recorder twice", func(t *testing.T) {
		rec.Reset()
		_, err := client.GetItem(t.Context(), get, rec.Option(),
			WithFault(Throttle("GetItem", 1)), WithFault(Throttle("GetItem", 1)))
		require.Error(t, err, "GetItem with two faults each failing one attempt succeeded, want failure after 2 attempts")
		got, want := rec.Summary(), "GetItem×1(failed ProvisionedThroughputExceeded)"
		assert.Equal(t, want, got, "Summary = %q, want %q", got, want)
	})
	t.Run("other operation untouched", func(t *testing.T) {
		rec.Reset()
		_, err := client.GetItem(t.Context(), get, WithFault(Throttle("PutItem", 100)))
		require.NoError(t, err, "GetItem")
	})
	t.Run("input visible", func(t *testing.T) {
		var seen string
		f := func(_ context.Context, op string, input any) error {
			if in, ok := input.(*dynamodb.GetItemInput); ok {
				seen = op + " " + aws.ToString(in.TableName)
			}
			return nil
		}
		_, err := client.GetItem(t.Context(), get, WithFault(f))
		require.NoError(t, err, "GetItem")
		assert.Equal(t, "GetItem "+table, seen, "fault saw")
	})
}

// TestDeadEndpoint checks that a client of a dead endpoint gives up after
// RetryMaxAttempts attempts.
func TestDeadEndpoint(t *testing.T) {
	t.Parallel()
	port, err := freePort() // nothing listens there now
	require.NoError(t, err)
	var rec Recorder
	client := NewClient("http://127.0.0.1:"+strconv.Itoa(port), rec.Option())
	_, err = client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.Error(t, err, "ListTables on a dead endpoint succeeded")
	calls := rec.Calls()
	require.Len(t, calls, 1, "calls = %+v, want one failed ListTables after %d attempts and no error code", calls, RetryMaxAttempts)
	assert.Equal(t, RetryMaxAttempts, calls[0].Attempts, "calls = %+v, want one failed ListTables after %d attempts and no error code", calls, RetryMaxAttempts)
	assert.Empty(t, calls[0].ErrorCode, "calls = %+v, want one failed ListTables after %d attempts and no error code", calls, RetryMaxAttempts)
}
