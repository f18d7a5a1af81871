package ddblocal

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
)

// captureStderr runs f with os.Stderr redirected and returns what was
// written. Tests that use it must not run in parallel.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
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
	if !errors.As(err, &ccf) {
		t.Fatalf("second PutItem error = %v, want ConditionalCheckFailedException", err)
	}
	if stderr != "" {
		t.Errorf("stderr during the calls = %q, want nothing", stderr)
	}
	if sdkLog.Len() != 0 {
		t.Errorf("SDK logged %q, want nothing", sdkLog.String())
	}

	calls := rec.Calls()
	if len(calls) != 2 {
		t.Fatalf("recorded %d calls (%s), want 2", len(calls), rec.Summary())
	}
	if c := calls[0]; c.Op != "PutItem" || c.Failed() || c.ErrorCode != "" || c.Attempts != 1 {
		t.Errorf("first call = %+v, want a successful PutItem in 1 attempt", c)
	}
	if c := calls[1]; c.Op != "PutItem" || !c.Failed() || c.ErrorCode != "ConditionalCheckFailedException" || c.Attempts != 1 {
		t.Errorf("second call = %+v, want a PutItem failed with ConditionalCheckFailedException in 1 attempt", c)
	}
	if got, want := rec.Summary(), "PutItem×1, PutItem×1(failed ConditionalCheckFailed)"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if got := rec.Count("PutItem"); got != 2 {
		t.Errorf("Count(PutItem) = %d, want 2", got)
	}
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
	if _, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
		RequestItems:           map[string][]types.WriteRequest{table: writes},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}); err != nil {
		t.Fatalf("BatchWriteItem: %v", err)
	}
	if _, err := client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
		RequestItems:           map[string]types.KeysAndAttributes{table: {Keys: []map[string]types.AttributeValue{key("a"), key("b")}}},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}); err != nil {
		t.Fatalf("BatchGetItem: %v", err)
	}
	if _, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a")}); err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
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
	if !errors.As(err, &tce) {
		t.Fatalf("TransactWriteItems error = %v, want TransactionCanceledException", err)
	}

	want := "BatchWriteItem×1[3 items], BatchGetItem×1[2 keys], GetItem×1, " +
		"TransactWriteItems×1[2 items](failed TransactionCanceled: None,ConditionalCheckFailed)"
	if got := rec.Summary(); got != want {
		t.Errorf("Summary =\n%s\nwant\n%s", got, want)
	}
	calls := rec.Calls()
	if len(calls) != 4 {
		t.Fatalf("recorded %d calls, want 4", len(calls))
	}
	// On-demand capacity: 1 WCU per item up to 1 KB, 0.5 RCU per eventually
	// consistent read up to 4 KB.
	if got, want := calls[0].Capacity.Units, 3.0; got != want {
		t.Errorf("BatchWriteItem consumed %v units, want %v", got, want)
	}
	if got, want := calls[1].Capacity.Units, 1.0; got != want {
		t.Errorf("BatchGetItem consumed %v units, want %v", got, want)
	}
	if got := calls[2].Capacity; got != (Capacity{}) {
		t.Errorf("GetItem without ReturnConsumedCapacity recorded %+v, want zero", got)
	}
	if got := calls[3].ErrorCode; got != "TransactionCanceledException" {
		t.Errorf("TransactWriteItems ErrorCode = %q, want TransactionCanceledException", got)
	}
	if got := rec.Consumed(""); got.Units != 4 {
		t.Errorf("Consumed(\"\") = %+v, want 4 units", got)
	}
	rec.Reset()
	if got := rec.Summary(); got != "no calls" {
		t.Errorf("Summary after Reset = %q, want \"no calls\"", got)
	}
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
			if _, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("k", i)}); err != nil {
				t.Errorf("PutItem: %v", err)
			}
			_ = rec.Summary() // reads race with writes
		})
	}
	wg.Wait()
	if got := rec.Count("PutItem"); got != n {
		t.Errorf("Count(PutItem) = %d, want %d", got, n)
	}
	if got, want := rec.Summary(), "PutItem×16"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
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
		if _, err := client.GetItem(t.Context(), get, WithFault(Throttle("GetItem", 1))); err != nil {
			t.Fatalf("GetItem with one throttled attempt: %v", err)
		}
		calls := rec.Calls()
		if len(calls) != 1 || calls[0].Attempts != 2 || calls[0].Failed() {
			t.Errorf("calls = %+v, want one successful GetItem in 2 attempts", calls)
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		rec.Reset()
		_, err := client.GetItem(t.Context(), get, WithFault(Throttle("", 100)))
		var pte *types.ProvisionedThroughputExceededException
		if !errors.As(err, &pte) {
			t.Fatalf("GetItem error = %v, want ProvisionedThroughputExceededException", err)
		}
		calls := rec.Calls()
		if len(calls) != 1 || calls[0].Attempts != RetryMaxAttempts || calls[0].ErrorCode != "ProvisionedThroughputExceededException" {
			t.Errorf("calls = %+v, want one GetItem failed after %d attempts", calls, RetryMaxAttempts)
		}
		if got, want := rec.Summary(), "GetItem×1(failed ProvisionedThroughputExceeded)"; got != want {
			t.Errorf("Summary = %q, want %q", got, want)
		}
	})
	t.Run("two faults and the recorder twice", func(t *testing.T) {
		rec.Reset()
		_, err := client.GetItem(t.Context(), get, rec.Option(),
			WithFault(Throttle("GetItem", 1)), WithFault(Throttle("GetItem", 1)))
		if err == nil {
			t.Fatal("GetItem with two faults each failing one attempt succeeded, want failure after 2 attempts")
		}
		if got, want := rec.Summary(), "GetItem×1(failed ProvisionedThroughputExceeded)"; got != want {
			t.Errorf("Summary = %q, want %q", got, want)
		}
	})
	t.Run("other operation untouched", func(t *testing.T) {
		rec.Reset()
		if _, err := client.GetItem(t.Context(), get, WithFault(Throttle("PutItem", 100))); err != nil {
			t.Fatalf("GetItem: %v", err)
		}
	})
	t.Run("input visible", func(t *testing.T) {
		var seen string
		f := func(_ context.Context, op string, input any) error {
			if in, ok := input.(*dynamodb.GetItemInput); ok {
				seen = op + " " + aws.ToString(in.TableName)
			}
			return nil
		}
		if _, err := client.GetItem(t.Context(), get, WithFault(f)); err != nil {
			t.Fatalf("GetItem: %v", err)
		}
		if want := "GetItem " + table; seen != want {
			t.Errorf("fault saw %q, want %q", seen, want)
		}
	})
}

// TestDeadEndpoint checks that a client of a dead endpoint gives up after
// RetryMaxAttempts attempts.
func TestDeadEndpoint(t *testing.T) {
	t.Parallel()
	port, err := freePort() // nothing listens there now
	if err != nil {
		t.Fatal(err)
	}
	var rec Recorder
	client := NewClient("http://127.0.0.1:"+strconv.Itoa(port), rec.Option())
	if _, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{}); err == nil {
		t.Fatal("ListTables on a dead endpoint succeeded")
	}
	calls := rec.Calls()
	if len(calls) != 1 || calls[0].Attempts != RetryMaxAttempts || calls[0].ErrorCode != "" {
		t.Errorf("calls = %+v, want one failed ListTables after %d attempts and no error code", calls, RetryMaxAttempts)
	}
}
