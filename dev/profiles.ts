// Deterministic, realistic-looking profiles: the same username always gets the same data, shaped
// like the real upstream's (padded ages, non-ASCII places, dotted credits, emoji, ragged whitespace).

const FIRST = ['Alice', 'Björn', 'Chloé', 'Dmitri', 'Eşref', 'Fatima', 'Gonzalo', 'Hana', 'Ingrid', 'José', 'Kofi', 'Łucja']
const LAST = ['Moreau', 'Nørgaard', 'Okafor', 'Pérez', 'Quist', 'Rossi', 'Søndergaard', 'Tanaka', 'Üzümcü', 'Varga', 'Weiß', 'Żak']
const PLACES = ['Göteborg, Sverige', 'São Paulo, Brasil', 'Kraków, Polska', 'Zürich, Schweiz', 'Reykjavík, Ísland',
  'Montréal, Canada', 'İstanbul, Türkiye', 'Malmö, Sverige', 'Düsseldorf, Deutschland', 'Córdoba, España']
const GENDERS = ['female', 'male', 'non-binary', 'prefer not to say']
const RANKS = ['Newcomer', 'Bronze', 'Silver', 'Gold', 'Platinum', 'Legend']
const SINCE = ['2 days ago', '5 months ago', '1 year ago', '3 years ago', '7 years ago', '11 years ago']
const ABOUT = ['Coffee ☕ and mountains 🏔️', 'Building things 🛠️   one bug at a time 🐛', 'Photographer 📷\n\n  street & sky',
  'Cat person 🐈  —  plant parent 🌱', 'Running 🏃‍♀️ marathons,   slowly', 'Music 🎶 lover; vinyl only 💿']
const POSTS = ['Sunrise over the fjord this morning', 'Finally finished the 1000-piece puzzle 🧩', 'Anyone up for a hike on Sunday?',
  'New recipe: cardamom buns 🥐', 'Throwback to the festival ✨', 'Reading list for the winter 📚', 'Fixed my bike, feeling proud 🚲']
const COMMENTERS = ['Bob', 'Carla', 'Deniz', 'Émile', 'Farah', 'Gunnar']

/** FNV-1a: cheap, stable, good enough to spread usernames over the tables above. */
function hash (text: string, salt: number): number {
  let value = 0x811c9dc5 ^ salt
  for (let i = 0; i < text.length; i++) {
    value ^= text.charCodeAt(i)
    value = Math.imul(value, 0x01000193)
  }
  return value >>> 0
}

function pick<T> (list: readonly T[], username: string, salt: number): T {
  return list[hash(username, salt) % list.length] as T
}

function dotted (value: number): string {
  return String(value).replace(/\B(?=(\d{3})+(?!\d))/g, '.')
}

export function profileOf (username: string): Record<string, string> {
  return {
    name: `${pick(FIRST, username, 1)} ${pick(LAST, username, 2)}`,
    age: ` ${18 + (hash(username, 3) % 60)} years `,
    gender: pick(GENDERS, username, 4),
    location: pick(PLACES, username, 5),
    Credits: dotted(hash(username, 6) % 50_000_000),
    rank: pick(RANKS, username, 7),
    videos: String(hash(username, 8) % 500),
    photos: String(hash(username, 9) % 5000),
    joined: `Member since ${pick(SINCE, username, 10)}`,
    about: `  ${pick(ABOUT, username, 11)}   `
  }
}

export function timelineOf (username: string): string[] {
  const author = profileOf(username).name
  const count = 3 + (hash(username, 12) % 5)
  return Array.from({ length: count }, (_, index) => {
    const likes = hash(username, 20 + index) % 300
    const commenter = pick(COMMENTERS, username, 40 + index)
    return `${author}   ${index + 1} hours ago \n  ${pick(POSTS, username, 30 + index)}    ` +
      `${likes} people like this  \n ${commenter}:   nice!    ${index} minutes ago  `
  })
}
