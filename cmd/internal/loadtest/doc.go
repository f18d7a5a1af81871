// Package loadtest is the engine of `zae-limiter load`: it drives a
// rate-limiter table with a [Scenario] (entities, hot keys, cascade,
// limits, token estimates, concurrency, duration or a target rate) and
// measures every acquire into a [Result]: outcomes, latency histograms, a
// per-second series and the DynamoDB calls with their consumed capacity.
//
// Results merge exactly ([Result.Merge]): the latency histograms are
// HdrHistograms with fixed log-linear buckets ([Histogram]), so the
// histograms of several processes or hosts add up to the histogram of all
// their acquires, and percentiles of the merged result are those of the
// whole run (within the buckets' 0.8 % width). [WriteText] and [WriteHTML] report a result; the HTML
// report is one self-contained file with inline SVG charts.
package loadtest
