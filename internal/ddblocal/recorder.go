package ddblocal

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// Call is one DynamoDB API call seen by a [Recorder]: one per client method
// call, whatever the number of attempts the retryer made.
type Call struct {
	// Op is the operation name, e.g. "UpdateItem".
	Op string
	// Items is the size of a batch or transaction: the keys of a
	// BatchGetItem, the put and delete requests of a BatchWriteItem, the
	// items of a TransactWriteItems or TransactGetItems. It is 0 for the
	// other operations.
	Items int
	// Err is the error the call returned; nil on success.
	Err error
	// ErrorCode is the service's error code for Err, e.g.
	// "ConditionalCheckFailedException"; empty on success and for errors
	// without a code (a refused connection, say).
	ErrorCode string
	// CancellationReasons holds, for a TransactionCanceledException, the
	// reason code of each item in request order ("None",
	// "ConditionalCheckFailed", ...).
	CancellationReasons []string
	// Attempts is the number of attempts the SDK made (1 without retries).
	Attempts int
	// Capacity sums the ConsumedCapacity of the output over all tables. It
	// is zero unless the request set ReturnConsumedCapacity and the call
	// succeeded.
	Capacity Capacity
}

// Failed reports whether the call returned an error.
func (c Call) Failed() bool { return c.Err != nil }

// Capacity is consumed capacity in capacity units, summed over the tables of
// a call. With ReturnConsumedCapacity TOTAL, Units holds the read units of a
// read operation and the write units of a write operation; with INDEXES
// Read and Write are also set.
type Capacity struct {
	Units float64 // CapacityUnits
	Read  float64 // ReadCapacityUnits
	Write float64 // WriteCapacityUnits
}

func (c *Capacity) add(cc *types.ConsumedCapacity) {
	if cc == nil {
		return
	}
	if cc.CapacityUnits != nil {
		c.Units += *cc.CapacityUnits
	}
	if cc.ReadCapacityUnits != nil {
		c.Read += *cc.ReadCapacityUnits
	}
	if cc.WriteCapacityUnits != nil {
		c.Write += *cc.WriteCapacityUnits
	}
}

// Recorder records every call of the clients it is attached to, for
// assertions on round trips, batch sizes, errors and consumed capacity. It
// is safe for concurrent use. The zero value is ready to use.
//
//	var rec ddblocal.Recorder
//	client := ddblocal.Client(t, rec.Option())
type Recorder struct {
	mu    sync.Mutex // guards calls
	calls []Call
}

// Option attaches r to a DynamoDB client, as an option function for
// [Client], [NewClient], dynamodb.New or a single call.
func (r *Recorder) Option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, r.Middleware)
	}
}

// Middleware adds r to an SDK middleware stack: append it to the APIOptions
// of any aws-sdk-go-v2 client, e.g. a DynamoDB Streams client.
func (r *Recorder) Middleware(stack *middleware.Stack) error {
	op := stack.ID() // the operation name, e.g. "PutItem"
	id := fmt.Sprintf("ddblocal.Recorder(%p)", r)
	if _, ok := stack.Initialize.Get(id); ok {
		return nil // attached twice (client and call options): record once
	}
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(id,
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			r.record(newCall(op, in.Parameters, out.Result, md, err))
			return out, md, err
		}), middleware.After)
}

func (r *Recorder) record(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// Calls returns a copy of the calls recorded since the last [Recorder.Reset],
// in the order they completed.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Reset forgets the recorded calls.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

// Count returns the number of recorded calls of operation op, or of all
// operations when op is "".
func (r *Recorder) Count(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if op == "" || c.Op == op {
			n++
		}
	}
	return n
}

// Consumed sums the consumed capacity of the recorded calls of operation
// op, or of all operations when op is "".
func (r *Recorder) Consumed(op string) Capacity {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sum Capacity
	for _, c := range r.calls {
		if op == "" || c.Op == op {
			sum.Units += c.Capacity.Units
			sum.Read += c.Capacity.Read
			sum.Write += c.Capacity.Write
		}
	}
	return sum
}

// Summary describes the recorded calls in order on one line, runs of equal
// calls folded, e.g.
//
//	GetItem×2, UpdateItem×1(failed ConditionalCheckFailed), BatchGetItem×1[2 keys]
//
// Error codes lose their "Exception" suffix; a canceled transaction lists
// its reasons: TransactWriteItems×1[2 items](failed TransactionCanceled: None,ConditionalCheckFailed).
// An empty recorder gives "no calls".
func (r *Recorder) Summary() string {
	calls := r.Calls()
	if len(calls) == 0 {
		return "no calls"
	}
	var parts []string
	prev, n := "", 0
	flush := func() {
		if n > 0 {
			op, rest, _ := strings.Cut(prev, "\x00")
			parts = append(parts, op+"×"+strconv.Itoa(n)+rest)
		}
	}
	for _, c := range calls {
		d := describe(c)
		if d != prev {
			flush()
			prev, n = d, 0
		}
		n++
	}
	flush()
	return strings.Join(parts, ", ")
}

// describe renders c for Summary as "Op\x00[n items](failed Code)".
func describe(c Call) string {
	var b strings.Builder
	b.WriteString(c.Op)
	b.WriteByte(0)
	if c.Items > 0 {
		noun := "item"
		if c.Op == "BatchGetItem" || c.Op == "TransactGetItems" {
			noun = "key"
		}
		if c.Items != 1 {
			noun += "s"
		}
		fmt.Fprintf(&b, "[%d %s]", c.Items, noun)
	}
	if c.Err != nil {
		b.WriteString("(failed")
		if c.ErrorCode != "" {
			b.WriteString(" " + strings.TrimSuffix(c.ErrorCode, "Exception"))
		}
		if len(c.CancellationReasons) > 0 {
			b.WriteString(": " + strings.Join(c.CancellationReasons, ","))
		}
		b.WriteString(")")
	}
	return b.String()
}

// newCall builds the record of one call from its input, output, metadata
// and error.
func newCall(op string, params, result any, md middleware.Metadata, err error) Call {
	c := Call{Op: op, Items: batchSize(params), Err: err, Attempts: 1}
	if ar, ok := retry.GetAttemptResults(md); ok && len(ar.Results) > 0 {
		c.Attempts = len(ar.Results)
	}
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			c.ErrorCode = ae.ErrorCode()
		}
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) {
			for _, reason := range tce.CancellationReasons {
				code := "None"
				if reason.Code != nil {
					code = *reason.Code
				}
				c.CancellationReasons = append(c.CancellationReasons, code)
			}
		}
		return c
	}
	c.Capacity = consumed(result)
	return c
}

// batchSize returns the number of keys or requests in a batch or
// transaction input, 0 for other inputs.
func batchSize(params any) int {
	n := 0
	switch in := params.(type) {
	case *dynamodb.BatchGetItemInput:
		for _, ka := range in.RequestItems {
			n += len(ka.Keys)
		}
	case *dynamodb.BatchWriteItemInput:
		for _, reqs := range in.RequestItems {
			n += len(reqs)
		}
	case *dynamodb.TransactWriteItemsInput:
		n = len(in.TransactItems)
	case *dynamodb.TransactGetItemsInput:
		n = len(in.TransactItems)
	}
	return n
}

// consumed sums the ConsumedCapacity of an operation output.
func consumed(result any) Capacity {
	var c Capacity
	var list []types.ConsumedCapacity
	switch out := result.(type) {
	case *dynamodb.GetItemOutput:
		c.add(out.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		c.add(out.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		c.add(out.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		c.add(out.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		c.add(out.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		c.add(out.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		list = out.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		list = out.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		list = out.ConsumedCapacity
	case *dynamodb.TransactGetItemsOutput:
		list = out.ConsumedCapacity
	}
	for i := range list {
		c.add(&list[i])
	}
	return c
}

// Fault decides, before each attempt of a DynamoDB call is sent, whether the
// attempt fails: a non-nil error is returned to the SDK's retryer as if the
// service had answered with it (so a throttling error is retried, up to
// [RetryMaxAttempts] attempts in all, and the call fails with it when every
// attempt fails). op is the operation name and input the call's input (e.g.
// *dynamodb.UpdateItemInput). A Fault may be called from several goroutines
// at once.
type Fault func(ctx context.Context, op string, input any) error

// WithFault returns a client option that consults f before every attempt.
// A [Recorder] on the same client records the injected failures.
func WithFault(f Fault) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return addFault(stack, f)
		})
	}
}

type faultInputKey struct{}

// faultSeq numbers the middlewares of WithFault, so that several faults can
// be attached to one client or call.
var faultSeq atomic.Uint64

func addFault(stack *middleware.Stack, f Fault) error {
	op := stack.ID()
	id := "ddblocal.Fault#" + strconv.FormatUint(faultSeq.Add(1), 10)
	// The Finalize step no longer sees the input: carry it down in the
	// context.
	err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc(id,
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			return next.HandleInitialize(middleware.WithStackValue(ctx, faultInputKey{}, in.Parameters), in)
		}), middleware.After)
	if err != nil {
		return err
	}
	mw := middleware.FinalizeMiddlewareFunc(id,
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if err := f(ctx, op, middleware.GetStackValue(ctx, faultInputKey{})); err != nil {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, err
			}
			return next.HandleFinalize(ctx, in)
		})
	// After the retry middleware, so every attempt is consulted.
	if _, ok := stack.Finalize.Get("Retry"); ok {
		return stack.Finalize.Insert(mw, "Retry", middleware.After)
	}
	return stack.Finalize.Add(mw, middleware.After)
}

// Throttle returns a [Fault] that fails the first n attempts of operation op
// (of every operation when op is "") with a
// ProvisionedThroughputExceededException, which the SDK retries.
func Throttle(op string, n int) Fault {
	var mu sync.Mutex
	left := n
	return func(_ context.Context, got string, _ any) error {
		if op != "" && got != op {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if left <= 0 {
			return nil
		}
		left--
		return &types.ProvisionedThroughputExceededException{Message: aws.String("ddblocal: injected throttling")}
	}
}
