//go:build !race

package larktest_test

const raceEnabled = false
