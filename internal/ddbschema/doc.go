// Package ddbschema is the DynamoDB item layout of schema 0.10.0, the
// single-table layout shared by every client of that schema:
// attribute names, key formats and their parsers, the table definition,
// item codecs and the update expressions built on them.
//
// Its types are plain item structs (millitokens, milliseconds, strings,
// int64s and times) with no behaviour of their own. The limiter package
// converts them to and from its public types, and the stream aggregator
// reads stream images and writes refills, shard changes and usage snapshots
// with them, so both agree on one layout. It never imports the limiter
// package and never calls AWS: every function turns values into attribute
// maps or request structs, or back.
//
// Numbers are written as decimal int64 strings without exponent. Readers
// are lenient (missing attributes take their defaults, wrongly typed ones
// read as absent) and strict about malformed numbers. Items of fixed shape are described by structs with dynamodbav
// tags and converted with the SDK's attributevalue package; attributes
// named after limits, bucket items and the entity reader (both on the
// acquire path) and audit details are converted by hand. Expressions use
// index-based placeholders (#a0, :v0), so limit names containing '-' or
// '.' are safe.
package ddbschema
