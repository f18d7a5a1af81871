package crossbackend_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/cmd/internal/crossbackend"
	"github.com/zaelimiter/limiter/memorystore"
)

// Example_memoryStore runs a program written for DynamoDB (ServeRequests:
// stored limits, a cascade, Acquire, Adjust, Commit, Do and a refusal) on
// the in-memory backend: for unit tests of code that uses the limiter, or
// single-process services.
func Example_memoryStore() {
	start := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	lines, err := crossbackend.ServeRequests(context.Background(), memorystore.New(),
		func(o *limiter.Options) { o.Principal = "unit-test" },
		func(o *limiter.Options) { o.Clock = func() time.Time { return start } }) // a frozen clock, for a stable output
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// call 0 used 700 tokens
	// call 1 used 900 tokens
	// call 2 refused by key-1/tpm, retry in 3.001s
	// do: LLM timeout
	// project has rpm=98 tpm=400 left
}
