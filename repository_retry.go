package limiter

import (
	"errors"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
)

// Retries of bucket writes that are not idempotent.
//
// A speculative write, an adjustment or a normal write adds to a balance.
// When DynamoDB applied such a write but the answer was lost (a 5xx after
// the write, a reset connection, a timeout), the SDK's standard retryer
// sends it again and the tokens are taken twice: over-charging that no
// later step can detect. The single-item bucket writes therefore retry only
// errors that prove nothing was applied: throttling (the request was
// refused before it ran) and a connection that was never made. Any other
// failure is returned: the acquire then follows its on-unavailable mode,
// and if the write had in fact applied, those tokens stay taken — bounded
// under-admission instead of a double charge. Transactions are retried as
// usual: TransactWriteItems carries an idempotency token.

// writeOptions makes a single-item bucket write retry only what provably did
// not apply.
func writeOptions(o *dynamodb.Options) {
	if o.Retryer != nil {
		o.Retryer = unappliedOnly{o.Retryer}
	}
}

// unappliedOnly is a retryer that retries only the errors its inner retryer
// retries and that prove the request was not applied.
type unappliedOnly struct{ aws.Retryer }

// IsErrorRetryable implements aws.Retryer.
func (r unappliedOnly) IsErrorRetryable(err error) bool {
	return r.Retryer.IsErrorRetryable(err) && notApplied(err)
}

// notApplied reports whether err proves that the request did not run:
// DynamoDB throttled it, or no connection was made.
func notApplied(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) {
		_, throttled := retry.DefaultThrottleErrorCodes[api.ErrorCode()]
		return throttled
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
