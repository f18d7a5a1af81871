package loadtest

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// CallMeter counts the DynamoDB calls of a client into a [Recorder]: it asks
// every read and write for its ConsumedCapacity (ReturnConsumedCapacity
// TOTAL: the table and its indexes) and records, per operation, the calls,
// errors, refused conditions, batch sizes and the capacity reported. It
// records only while enabled, so that a run's setup is not counted. It is
// safe for concurrent use. The zero value records nothing; call
// [NewCallMeter].
type CallMeter struct {
	rec     *Recorder
	enabled atomic.Bool
}

// NewCallMeter returns a disabled meter recording into rec.
func NewCallMeter(rec *Recorder) *CallMeter { return &CallMeter{rec: rec} }

// Enable starts (true) or stops (false) the recording.
func (m *CallMeter) Enable(on bool) {
	if m != nil {
		m.enabled.Store(on)
	}
}

// Option attaches the meter to a DynamoDB client.
func (m *CallMeter) Option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, m.middleware) }
}

func (m *CallMeter) middleware(stack *middleware.Stack) error {
	op := stack.ID()
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("loadtest.CallMeter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			items := askCapacity(in.Parameters)
			out, md, err := next.HandleInitialize(ctx, in)
			if m.rec != nil && m.enabled.Load() {
				s := OpStats{Calls: 1, Items: uint64(items)}
				if err != nil {
					s.Errors = 1
					if conditionFailed(err) {
						s.ConditionalFailures = 1
					}
				} else if rcu, wcu, ok := consumed(out.Result); ok {
					s.Reported, s.RCU, s.WCU = 1, rcu, wcu
				}
				m.rec.recordCall(op, s)
			}
			return out, md, err
		}), middleware.After)
}

// askCapacity sets ReturnConsumedCapacity TOTAL on the inputs that take it
// and returns the number of items of a batch or transaction.
func askCapacity(params any) int {
	total := types.ReturnConsumedCapacityTotal
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.PutItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.UpdateItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.DeleteItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.QueryInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.BatchGetItemInput:
		in.ReturnConsumedCapacity = total
		n := 0
		for _, ka := range in.RequestItems {
			n += len(ka.Keys)
		}
		return n
	case *dynamodb.BatchWriteItemInput:
		in.ReturnConsumedCapacity = total
		n := 0
		for _, reqs := range in.RequestItems {
			n += len(reqs)
		}
		return n
	case *dynamodb.TransactWriteItemsInput:
		in.ReturnConsumedCapacity = total
		return len(in.TransactItems)
	case *dynamodb.TransactGetItemsInput:
		in.ReturnConsumedCapacity = total
		return len(in.TransactItems)
	}
	return 0
}

// consumed sums the ConsumedCapacity of an output into read and write
// units; ok is false when the output carries none.
func consumed(result any) (rcu, wcu float64, ok bool) {
	var list []types.ConsumedCapacity
	read := false
	switch out := result.(type) {
	case *dynamodb.GetItemOutput:
		list, read = one(out.ConsumedCapacity), true
	case *dynamodb.QueryOutput:
		list, read = one(out.ConsumedCapacity), true
	case *dynamodb.BatchGetItemOutput:
		list, read = out.ConsumedCapacity, true
	case *dynamodb.TransactGetItemsOutput:
		list, read = out.ConsumedCapacity, true
	case *dynamodb.PutItemOutput:
		list = one(out.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		list = one(out.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		list = one(out.ConsumedCapacity)
	case *dynamodb.BatchWriteItemOutput:
		list = out.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		list = out.ConsumedCapacity
	}
	for _, c := range list {
		ok = true
		units := aws.ToFloat64(c.CapacityUnits)
		// With TOTAL, CapacityUnits is all there is; the read/write split
		// (INDEXES) is used when a server sends it.
		if c.ReadCapacityUnits != nil || c.WriteCapacityUnits != nil {
			rcu += aws.ToFloat64(c.ReadCapacityUnits)
			wcu += aws.ToFloat64(c.WriteCapacityUnits)
			continue
		}
		if read {
			rcu += units
		} else {
			wcu += units
		}
	}
	return rcu, wcu, ok
}

func one(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

// conditionFailed reports whether err is a refused condition.
func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return true
			}
		}
	}
	return false
}
