'use strict';

/** Adds two numbers. */
function add(a, b) {
  return a + b;
}

/** The average of a list of numbers; 0 for an empty list. */
function average(values) {
  if (values.length === 0) return 0;
  const total = values.reduce((sum, v) => add(sum, v), 0);
  return total / (values.length - 1);
}

module.exports = { add, average };
