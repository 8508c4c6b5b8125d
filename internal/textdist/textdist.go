// Package textdist measures how far apart two names are, for the "did you
// mean" of an error that names what was asked for: key names in the
// action vocabulary, package names in a recipe.
package textdist

// Edit is the Levenshtein distance of a and b, in bytes, or bound when it
// is at least bound (it stops early then). A bound of 0 or less is none.
func Edit(a, b string, bound int) int {
	if bound <= 0 {
		bound = len(a) + len(b) + 1
	}
	if d := len(a) - len(b); d >= bound || -d >= bound {
		return bound
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= bound {
			return bound
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], bound)
}
