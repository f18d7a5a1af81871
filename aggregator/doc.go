// Package aggregator is the DynamoDB stream processor of a rate-limiter
// table: it keeps usage snapshots, archives expired audit events, and
// refills and shards busy buckets. A [Processor] applies a batch of stream
// records — [Processor.Handle] is the Lambda handler, cmd/aggregator its
// thin main — and a [Runner] feeds a processor from the DynamoDB Streams
// API, so that the aggregator runs against DynamoDB Local on a laptop
// (cmd/aggregator-local) and in tests.
//
// Item layouts, key formats and the requests on them come from
// internal/ddbschema, which the limiter package's DynamoDB backend uses too;
// the refill arithmetic is the limiter's ([store.BucketState.RefilledAt]).
//
// # What a batch does, in order
//
//  1. Decode every record. Bucket records (PK {ns}/BUCKET#…, SK #STATE) of
//     INSERT and MODIFY events are parsed from their images; REMOVE events
//     of audit records (PK {ns}/AUDIT#…) yield the expired audit event;
//     everything else is ignored, among it items without a namespace and
//     bucket items of the layout before schema 0.9.0 (SK #BUCKET#{res}).
//     Values are converted from the Lambda event types in one adapter that
//     checks each value's type first (the aws-lambda-go accessors panic on a
//     mismatch).
//  2. Shard propagation, for every batch, also one without consumption: a
//     MODIFY that raises shard 0's shard count sets the new count on the
//     existing shards and creates the new shard items whole, up to 1024
//     shards. Every write is conditional, so redoing it is harmless.
//  3. Audit archival: the batch's expired audit events go to one
//     gzip-compressed JSON Lines object in S3, when an archive bucket and an
//     S3 client are configured. Every REMOVE of an audit record is archived,
//     whether TTL deleted it or not; each line is JSON, with non-ASCII
//     characters unescaped.
//  4. Usage snapshots: the consumption of each limit but wcu is the change
//     of its net counter tc (new − old; refunds count negative; a limit
//     missing from the old image, and the item an INSERT creates, count from
//     zero), floored to whole tokens per record, added with ADD to the flat
//     snapshot item of every configured window (hourly and daily by default)
//     that contains the record's event time, ApproximateCreationDateTime
//     (not the processor's clock, so a redelivered or late batch counts in
//     the window the consumption happened in); the processor's clock stands
//     in for a record without one. The writes of a batch are grouped per
//     snapshot item, adding every limit's tokens and one total_events per
//     limit delta, and applied atomically in chunks of whole records: one
//     UpdateItem when the batch touches one item, one TransactWriteItems per
//     100 items otherwise (a transaction costs 2 WCU per item). Placeholders
//     are index-based (#a0, :v0), so limit names with '-' or '.' work; a
//     counter named like a snapshot attribute (ttl, window, …) is left out
//     instead of failing the write. Each window type is an item of its own:
//     the sort key #USAGE#{resource}#{window start}#{window type} (and GSI2SK
//     USAGE#{window start}#{entity}#{window type}) names both, since the
//     hourly window that starts at midnight UTC, the daily window and on the
//     1st the monthly one start at the same instant. The original's
//     aggregator keys the item by the start only, so those windows share
//     one item holding their sum; the Python library reads the items
//     written here as separate snapshots (it reads the window type, start
//     and counters from the attributes), and the limiter reads the shared
//     items as the window their window attribute names. A window type
//     configured twice counts once.
//  5. Proactive refill: per bucket item the batch consumed from, the last
//     image and the summed tc deltas decide whether a refill is due (a
//     limit's refilled balance would not cover the batch's consumption); the
//     last record of the batch gives the item's shard count, and limits
//     other than wcu refill at 1/shard count of their capacity and rate. A
//     due refill credits every limit whose balance accrued since rf, not
//     only those that fell short, since rf moves to now for all of them (the
//     sub-millitoken remainder is lost). The write is `SET rf = now ADD
//     b_L_tk …` on condition `rf = <rf of the last image>`, so a slow-path
//     write made since wins. The processor's own refill writes come back
//     through the stream but consume nothing, so they trigger no more
//     refills.
//  6. Proactive sharding: shard 0 of a bucket is doubled (`SET shard_count =
//     2n` on condition `shard_count = n`) when the batch wrote to it
//     speculatively and its wcu level, refilled to now, is below 20 % of
//     capacity: a partition taking more than its 1000 writes per second. wcu
//     is per item (each shard is its own partition), so it refills and is
//     judged at its full capacity on every shard, and a bucket that has seen
//     many writes at a lower rate is never sharded. A batch that changed the
//     shard count does not double it again. The doubling write also refills
//     the item (rf lock, every limit credited) and sets its wcu back to
//     capacity, so the measure restarts at the halved load: the batches that
//     follow double again only if shard 0 still takes more than 1000 writes
//     per second (without the restart, a bucket at 1800 writes/s went from 1
//     to 128 shards in the end-to-end test; with it, to 2).
//
// # Failures
//
// Failures are reported, not swallowed: the records to redeliver are
// returned ([Result.Failures], and BatchItemFailures identified by sequence
// number from [Processor.Handle]): the first record that failed and every
// record after it, which is what the event source mapping redelivers anyway.
// A failure cuts the batch: a record that cannot be decoded, a failed
// propagation, archive or snapshot write stops the steps after it at that
// record, so a poison record is retried (and finally sent to the on-failure
// destination) and usage counters are never counted twice nor lost:
// propagation is idempotent and runs first, and every snapshot write covers
// whole records atomically. An archive object may be written again for
// records redelivered after a later snapshot failure (archived lines carry
// their unique event_id). Refill and sharding are best effort (the next
// batch or the client's slow path does the same work): their errors are
// logged and returned in [Result.Errors] only. Like any stream consumer, a
// batch whose invocation dies after its writes (a Lambda timeout) is
// redelivered whole and counted again.
package aggregator
