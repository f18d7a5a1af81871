package aggregator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// StreamsClient is the subset of *dynamodbstreams.Client the [Runner] uses.
type StreamsClient interface {
	ListStreams(ctx context.Context, in *dynamodbstreams.ListStreamsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.ListStreamsOutput, error)
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

var _ StreamsClient = (*dynamodbstreams.Client)(nil)

// Defaults of [RunnerOptions], those of the deployed event source mapping
// (package infra's template) where it has one.
const (
	DefaultBatchSize    = 100
	DefaultPollInterval = time.Second
	DefaultMaxRetries   = 3
)

// RunnerOptions configures a [Runner]. Zero values mean the documented
// defaults.
type RunnerOptions struct {
	// StreamARN is the stream to read. Empty means the table's stream,
	// found with ListStreams on the first poll.
	StreamARN string
	// StartingPosition is where the shards present at the first poll are
	// read from (shards found later are read from their start). Empty
	// means TRIM_HORIZON, everything the stream holds, which suits local
	// development and tests; LATEST mimics the deployed event source
	// mapping.
	StartingPosition streamtypes.ShardIteratorType
	// BatchSize is the most records per GetRecords call, and so per batch.
	// Zero means [DefaultBatchSize] (100, as the event source mapping).
	BatchSize int32
	// PollInterval is the pause between polls in [Runner.Run]. Zero means
	// [DefaultPollInterval].
	PollInterval time.Duration
	// MaxRetries is how often the failed part of a batch is processed again
	// before its records are dropped (logged and reported in
	// [Result.Failures]), as the event source mapping's
	// MaximumRetryAttempts. Zero means [DefaultMaxRetries]; negative means
	// no retry.
	MaxRetries int
	// Logger receives transient errors of [Runner.Run] and dropped
	// records. Nil discards.
	Logger *slog.Logger
}

// Runner feeds a [Processor] from a table's stream through the DynamoDB
// Streams API, the way the Lambda event source mapping does in AWS: batches
// of up to BatchSize records per shard in stream order, parents before
// children, the failed part of a batch retried. It lets the aggregator run
// against DynamoDB Local on a laptop and in tests. A Runner is not safe for
// concurrent use: call [Runner.Poll] or [Runner.Run] from one goroutine.
// The zero value is not usable; call [NewRunner].
type Runner struct {
	streams StreamsClient
	table   string
	proc    *Processor
	opts    RunnerOptions

	arn     string
	started bool // the first shard listing is done
	shards  map[string]*streamShard
	order   []*streamShard // in order of discovery
}

// streamShard is the reading position in one stream shard.
type streamShard struct {
	id, parent string
	start      streamtypes.ShardIteratorType
	iterator   *string
	lastSeq    string
	done       bool // closed and read to its end
}

// NewRunner returns a runner that reads table's stream with streams and
// feeds proc.
func NewRunner(streams StreamsClient, table string, proc *Processor, optFns ...func(*RunnerOptions)) *Runner {
	var o RunnerOptions
	for _, fn := range optFns {
		fn(&o)
	}
	if o.StartingPosition == "" {
		o.StartingPosition = streamtypes.ShardIteratorTypeTrimHorizon
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = DefaultMaxRetries
	case o.MaxRetries < 0:
		o.MaxRetries = 0
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Runner{streams: streams, table: table, proc: proc, opts: o, arn: o.StreamARN, shards: map[string]*streamShard{}}
}

// Run polls the stream every PollInterval until ctx is done, and then
// returns ctx's error. Errors of a poll are logged and the next poll tries
// again.
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTicker(r.opts.PollInterval)
	defer t.Stop()
	for {
		if _, err := r.Poll(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "poll failed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Poll reads every shard of the stream up to its current end, feeding each
// GetRecords page to the processor as one batch, and returns the summed
// results: Processed counts the records read, Failures the records dropped
// after MaxRetries. Records written while it runs (the processor's own
// writes among them) may be left for the next poll.
func (r *Runner) Poll(ctx context.Context) (Result, error) {
	var total Result
	if err := r.discover(ctx); err != nil {
		return total, err
	}
	for progressed := true; progressed; {
		progressed = false
		for _, sh := range r.order {
			if sh.done || !r.parentDone(sh) {
				continue
			}
			if err := r.drain(ctx, sh, &total); err != nil {
				return total, err
			}
			progressed = progressed || sh.done
		}
	}
	return total, nil
}

// parentDone reports whether sh's parent shard, if it is known, has been
// read to its end.
func (r *Runner) parentDone(sh *streamShard) bool {
	p, ok := r.shards[sh.parent]
	return !ok || p.done
}

// discover finds the stream and its shards.
func (r *Runner) discover(ctx context.Context) error {
	if r.arn == "" {
		out, err := r.streams.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String(r.table)})
		if err != nil {
			return fmt.Errorf("list streams of %s: %w", r.table, err)
		}
		if len(out.Streams) == 0 || out.Streams[0].StreamArn == nil {
			return fmt.Errorf("table %s has no stream", r.table)
		}
		r.arn = *out.Streams[len(out.Streams)-1].StreamArn
	}
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(r.arn)}
	for {
		out, err := r.streams.DescribeStream(ctx, in)
		if err != nil {
			return fmt.Errorf("describe stream %s: %w", r.arn, err)
		}
		if out.StreamDescription == nil {
			break
		}
		for _, s := range out.StreamDescription.Shards {
			id := aws.ToString(s.ShardId)
			if _, ok := r.shards[id]; ok || id == "" {
				continue
			}
			sh := &streamShard{id: id, parent: aws.ToString(s.ParentShardId), start: streamtypes.ShardIteratorTypeTrimHorizon}
			if !r.started {
				sh.start = r.opts.StartingPosition
			}
			r.shards[id] = sh
			r.order = append(r.order, sh)
		}
		if out.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
	r.started = true
	return nil
}

// iterator returns sh's shard iterator, getting a new one after the last
// record read (or at the shard's starting position) when needed.
func (r *Runner) iterator(ctx context.Context, sh *streamShard) (*string, error) {
	if sh.iterator != nil {
		return sh.iterator, nil
	}
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.arn), ShardId: aws.String(sh.id), ShardIteratorType: sh.start}
	if sh.lastSeq != "" {
		in.ShardIteratorType = streamtypes.ShardIteratorTypeAfterSequenceNumber
		in.SequenceNumber = aws.String(sh.lastSeq)
	}
	out, err := r.streams.GetShardIterator(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("shard iterator of %s: %w", sh.id, err)
	}
	sh.iterator = out.ShardIterator
	return sh.iterator, nil
}

// drain reads sh until it returns no records or ends.
func (r *Runner) drain(ctx context.Context, sh *streamShard, total *Result) error {
	for expired := 0; ; {
		it, err := r.iterator(ctx, sh)
		if err != nil {
			return err
		}
		if it == nil {
			sh.done = true
			return nil
		}
		out, err := r.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(r.opts.BatchSize)})
		var expiredErr *streamtypes.ExpiredIteratorException
		var trimmedErr *streamtypes.TrimmedDataAccessException
		switch {
		case (errors.As(err, &expiredErr) || errors.As(err, &trimmedErr)) && expired == 0:
			// Iterators expire after 15 minutes; trimmed records are gone.
			// Get a new iterator once.
			sh.iterator, expired = nil, 1
			if trimmedErr != nil {
				sh.lastSeq, sh.start = "", streamtypes.ShardIteratorTypeTrimHorizon
			}
			continue
		case err != nil:
			return fmt.Errorf("get records of shard %s: %w", sh.id, err)
		}
		expired = 0
		sh.iterator = out.NextShardIterator
		if len(out.Records) > 0 {
			r.feed(ctx, out.Records, total)
			if d := out.Records[len(out.Records)-1].Dynamodb; d != nil && d.SequenceNumber != nil {
				sh.lastSeq = *d.SequenceNumber
			}
		}
		if out.NextShardIterator == nil {
			sh.done = true
			return nil
		}
		if len(out.Records) == 0 {
			return nil
		}
	}
}

// feed processes one page of records, retrying its failed part.
func (r *Runner) feed(ctx context.Context, recs []streamtypes.Record, total *Result) {
	batch := make([]events.DynamoDBEventRecord, len(recs))
	for i, rec := range recs {
		batch[i] = EventRecord(rec, r.arn)
	}
	// The request id names the batch's archive object: the first record's
	// event id is unique in the stream, so a restarted runner does not
	// overwrite the objects of an earlier run.
	requestID := "local-" + batch[0].EventID
	total.Processed += len(batch)
	for attempt := 0; ; attempt++ {
		res := r.proc.Process(ctx, batch, requestID)
		total.SnapshotsUpdated += res.SnapshotsUpdated
		total.RefillsWritten += res.RefillsWritten
		total.ShardsDoubled += res.ShardsDoubled
		total.ShardItemsCreated += res.ShardItemsCreated
		total.EventsArchived += res.EventsArchived
		total.ObjectsCreated += res.ObjectsCreated
		total.Errors = append(total.Errors, res.Errors...)
		if len(res.Failures) == 0 {
			return
		}
		if attempt >= r.opts.MaxRetries || ctx.Err() != nil {
			r.opts.Logger.LogAttrs(ctx, slog.LevelError, "records dropped after retries",
				slog.Int("count", len(res.Failures)), slog.String("first_event_id", res.Failures[0].EventID),
				slog.String("error", res.Failures[0].Err.Error()))
			total.Failures = append(total.Failures, res.Failures...)
			return
		}
		batch = batch[len(batch)-len(res.Failures):] // the failures are a suffix
	}
}

// EventRecord converts a DynamoDB Streams record to the record a Lambda
// receives from the event source mapping of stream streamARN.
func EventRecord(rec streamtypes.Record, streamARN string) events.DynamoDBEventRecord {
	out := events.DynamoDBEventRecord{
		AWSRegion:      aws.ToString(rec.AwsRegion),
		EventID:        aws.ToString(rec.EventID),
		EventName:      string(rec.EventName),
		EventSource:    aws.ToString(rec.EventSource),
		EventVersion:   aws.ToString(rec.EventVersion),
		EventSourceArn: streamARN,
	}
	if id := rec.UserIdentity; id != nil {
		out.UserIdentity = &events.DynamoDBUserIdentity{Type: aws.ToString(id.Type), PrincipalID: aws.ToString(id.PrincipalId)}
	}
	if d := rec.Dynamodb; d != nil {
		if d.ApproximateCreationDateTime != nil {
			out.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
		}
		out.Change.Keys = eventImage(d.Keys)
		out.Change.NewImage = eventImage(d.NewImage)
		out.Change.OldImage = eventImage(d.OldImage)
		out.Change.SequenceNumber = aws.ToString(d.SequenceNumber)
		out.Change.SizeBytes = aws.ToInt64(d.SizeBytes)
		out.Change.StreamViewType = string(d.StreamViewType)
	}
	return out
}

func eventImage(img map[string]streamtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if img == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(img))
	for k, v := range img {
		out[k] = eventValue(v)
	}
	return out
}

func eventValue(v streamtypes.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *streamtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *streamtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *streamtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *streamtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = eventValue(e)
		}
		return events.NewListAttribute(l)
	case *streamtypes.AttributeValueMemberM:
		return events.NewMapAttribute(eventImage(v.Value))
	}
	return events.NewNullAttribute() // NULL, and unknown members
}
