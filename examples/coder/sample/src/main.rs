//! Prints the sum of a list of numbers.

mod parser;

fn main() {
    let numbers = parser::parse_list("1, 2, 3");
    println!("sum: {}", numbers.iter().sum::<i64>());
}
