package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// TestMain starts one DynamoDB Local for the package (see internal/ddblocal).
func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// TestRun runs the demo twice on one table with a frozen clock (no refill
// while it runs, so the report is exact whatever the machine's speed). The
// burst must admit, deny through the key and through the cascade to the
// project, roll back the failed call, and stay short; the second run must
// start from full buckets again (setup deletes the entities and buckets).
func TestRun(t *testing.T) {
	client := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	frozen := time.Now()
	clock := func() time.Time { return frozen }
	for i := range 2 {
		var out strings.Builder
		got, err := run(t.Context(), &out, client, table, clock)
		report := out.String()
		require.NoError(t, err, "run %d\noutput:\n%s", i+1, report)
		assert.Equal(t, (tally{admitted: 6, denied: 5, rolledBack: 1}), got, "run")
		for _, want := range []string{
			"   1 key-alice    861      2139 / 4139      admitted, adjusted +361, committed\n",
			"   3 key-alice      -      2139 / 3598      LLM failed -> rolled back\n",
			"   7 key-alice   1271      -484 / -242      admitted, adjusted +771, committed\n",
			// 742 tokens short at 5000/min: 8.904 s + 1 ms; Retry-After 9.
			"   8 key-bob        -      1242 / -242      denied by proj-acme tpm, Retry-After: 9 (8.91s)\n",
			// Both are short; the key's 19.68 s is the longer wait.
			"   9 key-alice      -      -484 / -242      denied by key-alice tpm, Retry-After: 20 (19.68s)\n",
			"6 admitted, 5 denied, 1 rolled back\n",
			"speculative fast path: 12 attempts, 2 fell back to read+write\n",
			"  success 5, fast_rejection 5, bucket_missing 2\n",
		} {
			assert.Contains(t, report, want, "run %d: output lacks %q", i+1, want)
		}
		assert.Less(t, strings.Count(report, "\n"), 40, "run")
		require.False(t, t.Failed(), "run %d output:\n%s", i+1, report)
	}
}
