// Package aggregator is the DynamoDB stream processor of a rate-limiter
// table: a port of the Python zae-limiter's aggregator Lambda ("the
// original" below). A
// [Processor] applies a batch of stream records — [Processor.Handle] is the
// Lambda handler, cmd/aggregator its thin main — and a [Runner] feeds a
// processor from the DynamoDB Streams API, so that the aggregator runs
// against DynamoDB Local on a laptop (cmd/aggregator-local) and in tests.
//
// Item layouts, key formats and the requests on them come from
// internal/ddbschema, which the limiter package's DynamoDB backend uses
// too; the refill arithmetic is the limiter's ([store.BucketState.RefilledAt]).
//
// # What a batch does, in order
//
//  1. Decode every record. Bucket records (PK {ns}/BUCKET#…, SK #STATE) of
//     INSERT and MODIFY events are parsed from their images; REMOVE events
//     of audit records (PK {ns}/AUDIT#…) yield the expired audit event;
//     everything else is ignored. Values are converted from the Lambda
//     event types in one adapter that checks each value's type first (the
//     aws-lambda-go accessors panic on a mismatch).
//  2. Shard propagation: a MODIFY that raises shard 0's shard count sets
//     the new count on the existing shards and creates the new shard items
//     whole. Every write is conditional, so redoing it is
//     harmless.
//  3. Audit archival: the batch's expired audit events go to one
//     gzip-compressed JSON Lines object in S3, when an
//     archive bucket and an S3 client are configured.
//  4. Usage snapshots: the consumption of each limit but wcu is the change
//     of its net counter tc (new − old; refunds count negative), floored to
//     whole tokens per record, added with ADD to the flat snapshot item of
//     every configured window (hourly and daily by default) that contains
//     the record's event time, ApproximateCreationDateTime (not the
//     processor's clock, so a redelivered or late batch counts in the
//     window the consumption happened in); the
//     processor's clock stands in for a record without one. The writes of
//     a batch are grouped per snapshot item and applied atomically in
//     chunks of whole records: one UpdateItem when the batch touches one
//     item, one TransactWriteItems per 100 items otherwise.
//  5. Proactive refill: per bucket item the batch consumed from, the last
//     image and the summed tc deltas decide, as in the original, whether
//     a refill is due (a limit's refilled balance
//     would not cover the batch's consumption); limits other than wcu
//     refill at 1/shard count of their capacity and rate. The write is
//     `SET rf = now ADD b_L_tk …` on condition `rf = <rf of the last
//     image>`, so a slow-path write made since wins.
//  6. Proactive sharding: shard 0 of a bucket is doubled (`SET shard_count
//     = 2n` on condition `shard_count = n`) when the batch wrote to it
//     speculatively and its wcu level, refilled to now, is below 20 % of
//     capacity: a partition taking more than its 1000 writes per second.
//     Because wcu refills (in the original it only drains, so about 800
//     lifetime writes at any rate sharded a bucket), a bucket that has
//     seen many writes at a lower rate is never sharded. The doubling write also refills the
//     item (rf lock, every limit credited) and sets its wcu back to
//     capacity, so the measure restarts at the halved load: the batches
//     that follow double again only if shard 0 still takes more than 1000
//     writes per second (without the restart, a bucket at 1800 writes/s
//     went from 1 to 128 shards in the end-to-end test; with it, to 2).
//
// # Where it differs from the original on purpose
//
//   - Failures are reported, not swallowed. The original logs every error
//     and returns success, so the stream never redelivers. Here the records
//     to redeliver are returned ([Result.Failures], and BatchItemFailures
//     identified by sequence number from [Processor.Handle]): the first
//     record that failed and every record after it, which is what the
//     event source mapping redelivers anyway. A failure cuts the batch:
//     a record that cannot be decoded, a failed propagation, archive or
//     snapshot write stops the steps after it at that record, so a poison
//     record is retried (and finally sent to the on-failure destination)
//     and usage counters are never counted twice nor lost: propagation is
//     idempotent and runs first, and every snapshot write covers whole
//     records atomically. An archive object may be written again for
//     records redelivered after a later snapshot failure (archived lines
//     carry their unique event_id). Refill and sharding are best effort
//     (the next batch or the client's slow path does the same work): their
//     errors are logged and returned in [Result.Errors] only. Like any
//     stream consumer, a batch whose invocation dies after its writes (a
//     Lambda timeout) is redelivered whole and counted again.
//   - No early return when a batch has no consumption: propagation runs for
//     every batch, so a batch holding only a shard count bump still
//     propagates it (the original returns early and skips it). Refill and
//     sharding consider only the bucket items the batch consumed from, so
//     the processor's own refill writes, which come back through the
//     stream, do not trigger more refills.
//   - The consumption carried by an INSERT (the bucket's creation) is
//     counted, and so is a limit initialised on an existing item (missing
//     from the old image): the original drops both, under-counting usage.
//   - Snapshot writes are grouped: one write per snapshot item per batch,
//     adding every limit's tokens and one total_events per limit delta —
//     the same item effects as the original's one UpdateItem per delta and
//     window, with far fewer calls (a transaction costs 2 WCU per item).
//     The layout is the original's, including its sort key
//     #USAGE#{resource}#{window start}: the hourly window that starts at
//     midnight and the daily window (and the monthly one on the 1st) are
//     the same item, whose counters hold the sum of both and whose window
//     attribute names the first writer. Readers get what the original's
//     would. Placeholders are
//     index-based (#a0, :v0), so limit names with '-' or '.' work (the
//     original puts names into the expression and fails on them).
//     Counters named like a snapshot attribute (ttl, window, …) are left
//     out instead of failing the write.
//   - A refill that is due credits every limit whose balance accrued since
//     rf, not only those that fell short: rf moves to now for all of them,
//     and an uncredited limit would lose its accrual (the original credits
//     only the short limits and so loses the others'; the sub-millitoken
//     remainder is still lost).
//   - wcu is per item: each shard is its own partition, so wcu refills and
//     is judged at its full capacity on every shard (the original divides
//     it by the shard count when refilling).
//   - The last record of the batch sets a bucket's shard count for refill
//     and sharding (the original takes the first), and a batch that changed
//     the shard count does not double it again.
//   - Legacy pre-0.9.0 bucket items (SK #BUCKET#{res}) are ignored: they
//     are orphaned, and the deployed stream filter (SK = #STATE) never
//     delivered them.
//   - Archival recognises the namespaced audit keys {ns}/AUDIT#… (the
//     original's stream filter looked for the bare prefix AUDIT# and so
//     never matched); deploy the event source mapping without that filter.
//     Like the original it archives every REMOVE of an audit record,
//     whether TTL deleted it or not. Lines are JSON-equivalent to the
//     original's, not byte-identical (non-ASCII characters are not
//     escaped); shard propagation stops at 1024 shards.
package aggregator
