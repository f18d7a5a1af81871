// Package iterx collects the limiter's listings (iter.Seq2[T, error]) into
// slices, for the command-line tool and the tests.
package iterx

import "iter"

// Collect returns the items seq yields until its first error, and that
// error.
func Collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for v, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}
