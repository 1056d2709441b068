#include <iostream>
int main() { std::cout << "sparq\n"; return 0; }
